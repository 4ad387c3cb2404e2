package dev.kmirror.oracle;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.Proxy;
import java.nio.charset.StandardCharsets;
import java.util.Optional;

import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.metadata.MetadataCache;
import org.apache.kafka.server.replica.Replica;
import org.apache.kafka.server.replica.ReplicaState;
import org.apache.kafka.storage.internals.log.LogOffsetMetadata;

/**
 * Apache Kafka's {@code org.apache.kafka.server.replica.Replica}: the leader's record of one
 * follower, updated from the follower's fetches, driven over a line protocol.
 *
 * <p>Usage: {@code ReplicaOracle}. Every request is one line on stdin, every answer one line on
 * stdout:
 *
 * <pre>
 * RESET                                          -> ok STATE   (a new Replica: ReplicaState.EMPTY)
 * FETCH fetchOffset followerStart timeMs leaderEnd -> ok STATE (updateFetchStateOrThrow, broker epoch -1)
 * RESET_STATE nowMs leaderEnd newLeader inSync   -> ok STATE   (resetReplicaState; booleans as 0/1)
 * CAUGHT_UP leaderEnd nowMs lagMs                -> true|false (stateSnapshot().isCaughtUp)
 * </pre>
 *
 * where STATE is {@code logStartOffset logEndOffset lastFetchLeaderLogEndOffset lastFetchTimeMs
 * lastCaughtUpTimeMs} of {@code stateSnapshot()}. A request Kafka refuses answers
 * {@code err Class}.
 *
 * <p>The Replica's metadata cache knows no broker (every lookup is empty); with broker epoch -1
 * Kafka skips the stale-epoch check, so the cache is never asked anything that matters.
 */
public final class ReplicaOracle {
    private static final TopicPartition PARTITION = new TopicPartition("oracle", 0);
    private static final int FOLLOWER = 1;

    private Replica replica = newReplica();

    public static void main(String[] args) throws IOException {
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "off");
        ReplicaOracle oracle = new ReplicaOracle();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        String line;
        while ((line = in.readLine()) != null) {
            String answer;
            try {
                answer = oracle.handle(line.trim().split(" "));
            } catch (Exception e) {
                answer = "err " + e.getClass().getSimpleName();
            }
            out.println(answer.replace('\n', ' ').replace('\r', ' '));
            out.flush();
        }
    }

    /** A metadata cache answering every lookup with nothing (empty Optional, null, false, 0). */
    private static MetadataCache emptyMetadataCache() {
        return (MetadataCache) Proxy.newProxyInstance(
            MetadataCache.class.getClassLoader(),
            new Class<?>[] {MetadataCache.class},
            (proxy, method, args) -> {
                Class<?> type = method.getReturnType();
                if (type == Optional.class) return Optional.empty();
                if (type == boolean.class) return false;
                if (type == int.class) return 0;
                if (type == long.class) return 0L;
                if (method.getName().equals("hashCode")) return 0;
                if (method.getName().equals("equals")) return proxy == args[0];
                if (method.getName().equals("toString")) return "EmptyMetadataCache";
                return null;
            });
    }

    private static Replica newReplica() {
        return new Replica(FOLLOWER, PARTITION, emptyMetadataCache());
    }

    private String handle(String[] w) {
        switch (w[0]) {
            case "RESET":
                replica = newReplica();
                return "ok " + state(replica.stateSnapshot());
            case "FETCH":
                replica.updateFetchStateOrThrow(
                    new LogOffsetMetadata(Long.parseLong(w[1])),
                    Long.parseLong(w[2]),
                    Long.parseLong(w[3]),
                    Long.parseLong(w[4]),
                    -1L);
                return "ok " + state(replica.stateSnapshot());
            case "RESET_STATE":
                replica.resetReplicaState(
                    Long.parseLong(w[1]),
                    Long.parseLong(w[2]),
                    w[3].equals("1"),
                    w[4].equals("1"));
                return "ok " + state(replica.stateSnapshot());
            case "CAUGHT_UP":
                return Boolean.toString(replica.stateSnapshot().isCaughtUp(
                    Long.parseLong(w[1]), Long.parseLong(w[2]), Long.parseLong(w[3])));
            default:
                return "err unknown request " + w[0];
        }
    }

    private static String state(ReplicaState s) {
        return s.logStartOffset() + " " + s.logEndOffset() + " " + s.lastFetchLeaderLogEndOffset()
            + " " + s.lastFetchTimeMs() + " " + s.lastCaughtUpTimeMs();
    }
}
