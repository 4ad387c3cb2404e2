"""Reads every partition of a topic from the earliest offset to the end offset with kafka-python
or confluent-kafka (librdkafka), and prints one JSON line per partition as the oracle's
ServeClients `read` step does: the record count, the first and last offsets, the end offset,
and a SHA-256 of every record's `offset|key|value` line.

Usage: read_all.py kafka-python|confluent-kafka BOOTSTRAP TOPIC read_committed|read_uncommitted
"""

import hashlib
import json
import sys
import time


def line(topic, partition, records, first, last, end, digest):
    print(json.dumps({"step": "read", "topic": topic, "partition": partition,
                      "records": records, "first": first, "last": last, "end": end,
                      "digest": digest}, separators=(",", ":")))


def text(b):
    return "null" if b is None else b.decode("utf-8")


def with_kafka_python(bootstrap, topic, isolation):
    from kafka import KafkaConsumer, TopicPartition
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                      auto_offset_reset="earliest", isolation_level=isolation)
    tps = [TopicPartition(topic, p) for p in sorted(c.partitions_for_topic(topic))]
    c.assign(tps)
    c.seek_to_beginning(*tps)
    end = c.end_offsets(tps)
    stats = {tp.partition: [0, -1, -1, hashlib.sha256()] for tp in tps}
    deadline = time.time() + 60
    while time.time() < deadline and any(c.position(tp) < end[tp] for tp in tps):
        for tp, records in c.poll(timeout_ms=500).items():
            for r in records:
                s = stats[tp.partition]
                s[0] += 1
                s[1] = r.offset if s[1] < 0 else s[1]
                s[2] = r.offset
                s[3].update(f"{r.offset}|{text(r.key)}|{text(r.value)}\n".encode())
    for tp in tps:
        s = stats[tp.partition]
        line(topic, tp.partition, s[0], s[1], s[2], end[tp], s[3].hexdigest())
    c.close()


def with_confluent_kafka(bootstrap, topic, isolation):
    from confluent_kafka import Consumer, TopicPartition, OFFSET_BEGINNING
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "kmirror-read-all",
                  "enable.auto.commit": False, "isolation.level": isolation,
                  "auto.offset.reset": "earliest"})
    meta = c.list_topics(topic, timeout=30)
    parts = sorted(meta.topics[topic].partitions)
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
    end = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in parts}
    if isolation == "read_committed":
        # The high watermark is not the last stable offset: read until a quiet second.
        end = None
    stats = {p: [0, -1, -1, hashlib.sha256()] for p in parts}
    deadline = time.time() + 60
    quiet_since = time.time()
    while time.time() < deadline:
        m = c.poll(0.2)
        if m is None:
            if end is None and time.time() - quiet_since > 2:
                break
            if end is not None and all(stats[p][2] + 1 >= end[p] or end[p] == 0 for p in parts):
                break
            continue
        if m.error():
            continue
        quiet_since = time.time()
        s = stats[m.partition()]
        s[0] += 1
        s[1] = m.offset() if s[1] < 0 else s[1]
        s[2] = m.offset()
        s[3].update(f"{m.offset()}|{text(m.key())}|{text(m.value())}\n".encode())
    for p in parts:
        s = stats[p]
        e = c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
        line(topic, p, s[0], s[1], s[2], e, s[3].hexdigest())
    c.close()


if __name__ == "__main__":
    client, bootstrap, topic, isolation = sys.argv[1:5]
    {"kafka-python": with_kafka_python, "confluent-kafka": with_confluent_kafka}[client](
        bootstrap, topic, isolation)
