package recrawl.graphx;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.List;

import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.graphx.Edge;
import org.apache.spark.graphx.EdgeContext;
import org.apache.spark.graphx.Graph;
import org.apache.spark.graphx.TripletFields;
import org.apache.spark.graphx.VertexRDD;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.storage.StorageLevel;

import scala.Option;
import scala.Tuple2;
import scala.reflect.ClassTag;
import scala.reflect.ClassTag$;
import scala.runtime.AbstractFunction1;
import scala.runtime.AbstractFunction2;
import scala.runtime.AbstractFunction3;
import scala.runtime.BoxedUnit;

/**
 * PageRank and connected components on Spark GraphX for recrawl/graph_graphx.py (PySpark has no
 * GraphX API; Python calls these static methods through py4j).
 *
 * PageRank is this project's power iteration (recrawl/graph.py, recrawl/graph_local.py), not
 * GraphX's PageRank.runUntilConvergence: ranks sum to 1, a dangling vertex's rank is spread over
 * all vertices, every vertex is updated every iteration, and the iteration stops when the L1
 * change of the whole rank vector is below the tolerance (GraphX's stops per vertex and drops
 * dangling mass). The iteration is GraphX's own: aggregateMessages over the partitioned edges,
 * outerJoinVertices for the update, the vertex index reused across iterations.
 */
public final class GraphEngine {
  private GraphEngine() {}

  private static <T> ClassTag<T> tag(Class<T> c) {
    return ClassTag$.MODULE$.apply(c);
  }

  /** What pagerank returns: the ranks (id long, pagerank double) and how the iteration went. */
  public static final class PageRankResult {
    public final Dataset<Row> ranks;
    public final int iterations;
    public final double delta;
    public final double[] seconds;

    PageRankResult(Dataset<Row> ranks, int iterations, double delta, double[] seconds) {
      this.ranks = ranks;
      this.iterations = iterations;
      this.delta = delta;
      this.seconds = seconds;
    }

    public Dataset<Row> ranks() { return ranks; }
    public int iterations() { return iterations; }
    public double delta() { return delta; }
    public double[] seconds() { return seconds; }
  }

  // Vertex attribute: {rank, 1 if dangling else 0}.
  static final class Send extends AbstractFunction1<EdgeContext<double[], Double, Double>, BoxedUnit>
      implements Serializable {
    @Override
    public BoxedUnit apply(EdgeContext<double[], Double, Double> c) {
      c.sendToDst(c.srcAttr()[0] * c.attr());
      return BoxedUnit.UNIT;
    }
  }

  static final class Sum extends AbstractFunction2<Double, Double, Double> implements Serializable {
    @Override
    public Double apply(Double a, Double b) {
      return a + b;
    }
  }

  static final class Update extends AbstractFunction3<Object, double[], Option<Double>, double[]>
      implements Serializable {
    private final double teleport;
    private final double damping;

    Update(double teleport, double damping) {
      this.teleport = teleport;
      this.damping = damping;
    }

    @Override
    public double[] apply(Object id, double[] old, Option<Double> contrib) {
      double c = contrib.isDefined() ? contrib.get() : 0.0;
      return new double[] {teleport + damping * c, old[1]};
    }
  }

  /** {|new - old|, new rank if dangling}: summed, the L1 change and the next dangling mass. */
  static final class Change extends AbstractFunction3<Object, double[], double[], double[]>
      implements Serializable {
    @Override
    public double[] apply(Object id, double[] now, double[] before) {
      return new double[] {Math.abs(now[0] - before[0]), now[1] > 0 ? now[0] : 0.0};
    }
  }

  /**
   * PageRank of `vertices` (id long, dangling boolean) over `edges` (src long, dst long, share
   * double), where share is the edge's weight over its source's out-weight and both ends are
   * among the vertices. `n` vertices, `dangling` of them dangling (no out-edge at all).
   */
  public static PageRankResult pagerank(Dataset<Row> vertices, Dataset<Row> edges, long n,
      long dangling, double damping, int maxIterations, double tolerance) {
    SparkSession spark = vertices.sparkSession();
    StorageLevel level = StorageLevel.MEMORY_AND_DISK();
    double init = 1.0 / n;
    JavaRDD<Tuple2<Object, double[]>> vs = vertices.select("id", "dangling").javaRDD().map(
        r -> new Tuple2<Object, double[]>(r.getLong(0), new double[] {init, r.getBoolean(1) ? 1 : 0}));
    JavaRDD<Edge<Double>> es = edges.select("src", "dst", "share").javaRDD().map(
        r -> new Edge<Double>(r.getLong(0), r.getLong(1), r.getDouble(2)));
    Graph<double[], Double> g = Graph.apply(vs.rdd(), es.rdd(), new double[] {0.0, 0.0}, level, level,
        tag(double[].class), tag(Double.class));
    g.cache();
    double danglingSum = (double) dangling / n;
    double base = (1.0 - damping) / n;
    double delta = Double.POSITIVE_INFINITY;
    int it = 0;
    List<Double> seconds = new ArrayList<>();
    while (it < maxIterations) {
      it++;
      long started = System.nanoTime();
      VertexRDD<Double> contrib = g.aggregateMessages(new Send(), new Sum(), TripletFields.Src,
          tag(Double.class));
      Graph<double[], Double> next = g.outerJoinVertices(contrib,
          new Update(base + damping * danglingSum / n, damping), tag(Double.class),
          tag(double[].class), null).cache();
      // One action: the L1 change and the next dangling mass, zipped on the shared vertex index.
      double[] stats = next.vertices().innerZipJoin(g.vertices(), new Change(), tag(double[].class),
              tag(double[].class)).toJavaRDD().map(t -> t._2())
          .reduce((a, b) -> new double[] {a[0] + b[0], a[1] + b[1]});
      next.edges().foreachPartition(new Drain());  // materialise before the previous is dropped
      g.vertices().unpersist(false);
      g.edges().unpersist(false);
      g = next;
      delta = stats[0];
      danglingSum = stats[1];
      seconds.add((System.nanoTime() - started) / 1e9);
      if (delta < tolerance) {
        break;
      }
    }
    StructType schema = new StructType().add("id", DataTypes.LongType, false)
        .add("pagerank", DataTypes.DoubleType, false);
    JavaRDD<Row> rows = g.vertices().toJavaRDD().map(t -> RowFactory.create(t._1(), t._2()[0]));
    double[] secs = seconds.stream().mapToDouble(Double::doubleValue).toArray();
    return new PageRankResult(spark.createDataFrame(rows, schema), it, delta, secs);
  }

  static final class Drain extends AbstractFunction1<scala.collection.Iterator<Edge<Double>>, BoxedUnit>
      implements Serializable {
    @Override
    public BoxedUnit apply(scala.collection.Iterator<Edge<Double>> rows) {
      while (rows.hasNext()) {
        rows.next();
      }
      return BoxedUnit.UNIT;
    }
  }

  /**
   * Weakly (GraphX ConnectedComponents) or strongly (GraphX StronglyConnectedComponents:
   * trimming and forward-backward colouring, run until every vertex is resolved) connected
   * components of `vertices` (id long) and `edges` (src long, dst long, both ends among the
   * vertices): rows (id long, component long), the component named by its smallest id.
   */
  public static Dataset<Row> components(Dataset<Row> vertices, Dataset<Row> edges, boolean strong) {
    SparkSession spark = vertices.sparkSession();
    StorageLevel level = StorageLevel.MEMORY_AND_DISK();
    JavaRDD<Tuple2<Object, Boolean>> vs = vertices.select("id").javaRDD()
        .map(r -> new Tuple2<Object, Boolean>(r.getLong(0), Boolean.TRUE));
    JavaRDD<Edge<Boolean>> es = edges.select("src", "dst").javaRDD()
        .map(r -> new Edge<Boolean>(r.getLong(0), r.getLong(1), Boolean.TRUE));
    Graph<Boolean, Boolean> g = Graph.apply(vs.rdd(), es.rdd(), Boolean.TRUE, level, level,
        tag(Boolean.class), tag(Boolean.class));
    Graph<Object, Boolean> labelled = strong
        ? g.ops().stronglyConnectedComponents(Integer.MAX_VALUE)
        : g.ops().connectedComponents();
    StructType schema = new StructType().add("id", DataTypes.LongType, false)
        .add("component", DataTypes.LongType, false);
    JavaRDD<Row> rows = labelled.vertices().toJavaRDD()
        .map(t -> RowFactory.create(t._1(), t._2()));
    return spark.createDataFrame(rows, schema);
  }
}
