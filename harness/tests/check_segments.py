#!/usr/bin/env python3
"""Independent check of kmirror segment files with kafka-python's record reader.

Usage: check_segments.py EXPECTATIONS.json

EXPECTATIONS.json:
{
  "segments": [
    {
      "path": "/.../00000000000000000000.log",
      "index": "/.../00000000000000000000.index",        (optional)
      "batches": [
        {
          "base_offset": 0, "last_offset": 2, "leader_epoch": 0,
          "producer_id": -1, "producer_epoch": -1, "base_sequence": -1,
          "transactional": false,
          "control": null,           (or the control record type: 0 ABORT, 1 COMMIT, 100 MIRROR_PID_RESET)
          "synthetic": true          (optional: records are kmirror's synthetic ones, key str(offset),
                                      value "kmirror:<offset>")
        }, ...
      ]
    }, ...
  ],
  "leader_epoch_checkpoint": {"path": "...", "entries": [[epoch, start_offset], ...]}   (optional)
}

For every segment, kafka-python's MemoryRecords is run over the file bytes: each batch's CRC is
validated (validate_crc) before its records are read, its header fields are compared with the
expectations, its records are decoded (control records by kafka-python's ControlRecord), and
valid_bytes() must equal the file size (no trailing garbage). The offset index, when given, is
checked to be Kafka's format: 8-byte entries (int32 relative offset, int32 position), strictly
increasing, each pointing at the start of a batch whose last offset it names.

Exit status: 0 all good; 1 a check failed (every failure is printed); 3 kafka-python missing.
"""

import json
import os
import struct
import sys

try:
    import kafka
    from kafka.record.memory_records import MemoryRecords
except ImportError as e:  # pragma: no cover - reported to the Rust test
    print("kafka-python is not installed (pip install kafka-python==3.0.12): %s" % e,
          file=sys.stderr)
    sys.exit(3)

END_TXN_MARKER_VALUE = struct.pack(">hi", 0, 0)
MIRROR_PID_RESET_VALUE = struct.pack(">h", 0)


class Checker:
    def __init__(self):
        self.failures = []
        self.batches = 0
        self.records = 0

    def fail(self, where, msg):
        self.failures.append("%s: %s" % (where, msg))

    def expect(self, where, what, got, want):
        if got != want:
            self.fail(where, "%s is %r, expected %r" % (what, got, want))

    def check_segment(self, seg):
        path = seg["path"]
        with open(path, "rb") as f:
            data = f.read()
        name = os.path.basename(path)
        base = int(name.split(".")[0])
        records = MemoryRecords(data)
        expected = seg["batches"]
        positions = {}
        pos = 0
        i = 0
        while records.has_next():
            batch = records.next_batch()
            where = "%s batch %d (byte %d)" % (name, i, pos)
            if not batch.validate_crc():
                self.fail(where, "CRC-32C check failed")
                return
            if i >= len(expected):
                self.fail(where, "unexpected batch at offset %d" % batch.base_offset)
                return
            want = expected[i]
            self.expect(where, "magic", batch.magic, 2)
            self.expect(where, "base_offset", batch.base_offset, want["base_offset"])
            self.expect(where, "last_offset", batch.last_offset, want["last_offset"])
            self.expect(where, "leader_epoch", batch.leader_epoch, want["leader_epoch"])
            self.expect(where, "producer_id", batch.producer_id, want["producer_id"])
            self.expect(where, "producer_epoch", batch.producer_epoch, want["producer_epoch"])
            self.expect(where, "base_sequence", batch.base_sequence, want["base_sequence"])
            self.expect(where, "is_transactional", batch.is_transactional, want["transactional"])
            self.expect(where, "is_control_batch", batch.is_control_batch,
                        want["control"] is not None)
            self.expect(where, "compression_type", batch.compression_type, 0)
            if batch.base_offset < base:
                self.fail(where, "batch offset below the segment base %d" % base)
            recs = list(batch)  # after validate_crc, as kafka-python requires
            self.records += len(recs)
            self.expect(where, "records_count", len(recs), batch.records_count)
            if want["control"] is not None:
                self.expect(where, "control records", len(recs), 1)
                if recs:
                    r = recs[0]
                    self.expect(where, "control key version", r.version, 0)
                    self.expect(where, "control type", r.type, want["control"])
                    self.expect(where, "control offset", r.offset, batch.base_offset)
                    value = (MIRROR_PID_RESET_VALUE if want["control"] == 100
                             else END_TXN_MARKER_VALUE)
                    self.expect(where, "control value", r.value, value)
            elif want.get("synthetic"):
                self.expect(where, "record count", len(recs),
                            want["last_offset"] - want["base_offset"] + 1)
                for r in recs:
                    self.expect(where, "key of %d" % r.offset, r.key, str(r.offset).encode())
                    self.expect(where, "value of %d" % r.offset, r.value,
                                ("kmirror:%d" % r.offset).encode())
                    self.expect(where, "headers of %d" % r.offset, r.headers, [])
                self.expect(where, "record offsets", [r.offset for r in recs],
                            list(range(want["base_offset"], want["last_offset"] + 1)))
            positions[pos] = batch.last_offset
            pos += batch.size_in_bytes
            self.batches += 1
            i += 1
        if i != len(expected):
            self.fail(name, "%d batches, expected %d" % (i, len(expected)))
        valid = records.valid_bytes()
        self.expect(name, "valid_bytes()", valid, len(data))
        if "index" in seg:
            self.check_index(seg["index"], base, positions)

    def check_index(self, path, base, positions):
        name = os.path.basename(path)
        with open(path, "rb") as f:
            data = f.read()
        if len(data) % 8:
            self.fail(name, "size %d is not a multiple of 8" % len(data))
            return
        last = None
        for n in range(len(data) // 8):
            rel, position = struct.unpack_from(">ii", data, n * 8)
            where = "%s entry %d" % (name, n)
            if last is not None and (rel <= last[0] or position <= last[1]):
                self.fail(where, "(%d, %d) does not follow %r" % (rel, position, last))
            if position not in positions:
                self.fail(where, "position %d is not the start of a batch" % position)
            elif positions[position] != base + rel:
                self.fail(where, "offset %d but the batch at %d ends at %d"
                          % (base + rel, position, positions[position]))
            last = (rel, position)

    def check_epoch_checkpoint(self, ckpt):
        name = os.path.basename(ckpt["path"])
        with open(ckpt["path"]) as f:
            lines = f.read().split("\n")
        if lines[-1] == "":
            lines.pop()
        else:
            self.fail(name, "does not end in a newline")
        self.expect(name, "version line", lines[:1], ["0"])
        entries = [[int(x) for x in line.split(" ")] for line in lines[2:]]
        self.expect(name, "count line", lines[1:2], [str(len(entries))])
        self.expect(name, "entries", entries, ckpt["entries"])


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    c = Checker()
    for seg in spec["segments"]:
        c.check_segment(seg)
    if "leader_epoch_checkpoint" in spec:
        c.check_epoch_checkpoint(spec["leader_epoch_checkpoint"])
    if c.failures:
        for f in c.failures:
            print("FAIL " + f, file=sys.stderr)
        print("%d checks failed (kafka-python %s)" % (len(c.failures), kafka.__version__),
              file=sys.stderr)
        return 1
    print("kafka-python %s read %d segments, %d batches, %d records: all as expected"
          % (kafka.__version__, len(spec["segments"]), c.batches, c.records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
