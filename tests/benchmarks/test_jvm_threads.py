"""benchmarks/jvm_threads.py: a thread's stat line, its group, and the --variant syntax."""

from __future__ import annotations

import os
import threading

import pytest

from benchmarks.jvm_threads import ThreadSampler, parse_stat, parse_variant, thread_group


def test_pool_numbers_are_cut_from_thread_names():
    assert thread_group("C2 CompilerThre") == "C2 CompilerThre"
    assert thread_group("GC Thread#1") == "GC Thread"
    assert thread_group("Thread-17") == "Thread"
    assert thread_group("Executor task l") == "Executor task l"
    assert thread_group("shuffle-exchang") == "shuffle-exchang"
    assert thread_group("ForkJoinPool-1-worker-3") == "ForkJoinPool-1-worker"


def test_a_stat_line_gives_the_name_and_cpu_even_with_spaces_and_parentheses():
    tick = os.sysconf("SC_CLK_TCK")
    line = f"4242 (Exec (x) 1) S 1 2 3 4 5 6 7 8 9 10 {3 * tick} {2 * tick} 0 0 20 0 1 0 99"
    assert parse_stat(line) == ("Exec (x) 1", 5.0)
    # this process's own main thread, as the kernel writes it
    with open(f"/proc/self/task/{threading.get_native_id()}/stat") as f:
        name, cpu = parse_stat(f.read())
    assert name and cpu >= 0.0


def test_variants_name_their_environment_and_refuse_a_malformed_item():
    assert parse_variant("baseline") == ("baseline", {})
    assert parse_variant("quick:JAVA_TOOL_OPTIONS=-XX:TieredStopAtLevel=1,X=a=b") == (
        "quick", {"JAVA_TOOL_OPTIONS": "-XX:TieredStopAtLevel=1", "X": "a=b"})
    with pytest.raises(SystemExit, match="expected NAME"):
        parse_variant("bad:NOVALUE")
    with pytest.raises(SystemExit, match="no name"):
        parse_variant(":X=1")


def test_threads_alive_before_the_run_count_from_where_they_were():
    s = ThreadSampler(interval=1.0)
    s.seen = {("1@9", "1"): ("GC Thread#0", 7.0), ("1@9", "2"): ("Thread-3", 2.5),
              ("1@50", "1"): ("C2 CompilerThre", 4.0)}  # pid 1 again, a later process
    s.roles = {"1@9": "executor", "1@50": "driver: crawler verb"}
    before = {("1@9", "1"): ("GC Thread#0", 5.0)}
    assert s.by_group(before) == {"GC Thread": 2.0, "Thread": 2.5, "C2 CompilerThre": 4.0}
    roles = s.by_role(before)
    assert roles["executor"]["cpu"] == 4.5 and roles["executor"]["compilers"] == 0.0
    assert roles["driver: crawler verb"] == {"pids": {"1@50"}, "cpu": 4.0, "compilers": 4.0}


def test_a_jvm_is_named_by_its_main_class_or_the_program_that_started_it():
    from benchmarks.jvm_threads import role_of

    java = ["/usr/bin/java", "-cp", "x"]
    executor = java + ["org.apache.spark.executor.CoarseGrainedExecutorBackend", "--executor-id", "1"]
    assert role_of(executor, ["bash", "spark-class"]) == "executor"
    assert role_of(java + ["org.apache.spark.deploy.worker.Worker"], []) == "worker"
    submit = java + ["org.apache.spark.deploy.SparkSubmit", "pyspark-shell"]
    assert role_of(submit, ["python", "-m", "app.daemon", "--key", "k"]) == "driver: warm driver"
    assert role_of(submit, ["python", "-m", "app.cli", "round"]) == "driver: crawler verb"
    assert role_of(submit, ["python", "-m", "pytest", "tests"]) == "driver: test session"
    assert role_of(submit, ["python", "/r/tests/spark_jobs/test_s3a.py", "{}"]) == \
        "driver: test_s3a.py"
    assert role_of(submit, []) == "other JVM"
    script = java + ["org.apache.spark.deploy.SparkSubmit", "/r/scripts/submit_main.py", "pagerank"]
    assert role_of(script, ["python", "-m", "pytest"]) == "driver: spark-submit"
