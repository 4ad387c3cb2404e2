package dev.kmirror.oracle;

/** Prints the Apache Kafka version on the classpath: a smoke test of the oracle build. */
public final class Version {
    private Version() {}

    public static void main(String[] args) {
        System.out.println(org.apache.kafka.common.utils.internals.AppInfoParser.getVersion());
    }
}
