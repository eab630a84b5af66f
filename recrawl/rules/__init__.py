"""The crawl's rules, pure Python with their SQL twins: what is due and eligible, the change-rate
estimators and revisit policies, the signals' trust, traps, politeness delays, the round's steps
and the health gates. Imports nothing of the project but recrawl.config (tests/test_layers.py)."""
