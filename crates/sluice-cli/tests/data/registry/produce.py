"""Test producer independent of sluice: writes records with the Confluent Python client's
AvroSerializer, ProtobufSerializer or JSONSerializer (the schema registry's wire format), and
the values PostgreSQL must then hold, as text, computed here from the same Python values.

usage: produce.py FORMAT TOPIC FIRST COUNT EXPECTED_OUT [VERSION]
  FORMAT   avro | protobuf | json
  VERSION  1 (default) or 2 (Avro only: v2 adds `added` with a default, drops `dropped`)
environment: KAFKA_BOOTSTRAP_SERVERS, SCHEMA_REGISTRY_URL
The expected file is JSON: {column: [text per record in id order, "NULL" for NULL]}.
"""
import datetime as dt
import decimal
import importlib
import json
import os
import subprocess
import sys
import tempfile
import uuid

from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.serialization import MessageField, SerializationContext, StringSerializer

HERE = os.path.dirname(os.path.abspath(__file__))
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
EPOCH_DAY = dt.date(1970, 1, 1)


def micros(at):
    return (at - EPOCH) // dt.timedelta(microseconds=1)


def pg_time(micro_of_day):
    seconds, micro = divmod(micro_of_day, 1_000_000)
    text = "%02d:%02d:%02d" % (seconds // 3600, seconds // 60 % 60, seconds % 60)
    if micro:
        text += ("." + "%06d" % micro).rstrip("0")
    return text


def pg_jsonb(mapping):
    """jsonb's text: keys by length then bytes, ', ' and ': ' between."""
    keys = sorted(mapping, key=lambda k: (len(k.encode()), k.encode()))
    return "{" + ", ".join(json.dumps(k) + ": " + json.dumps(mapping[k]) for k in keys) + "}"


def pg_float(value):
    """A float's text as PostgreSQL prints it (shortest round trip, no trailing `.0`)."""
    text = repr(value)
    return text[:-2] if text.endswith(".0") else text


def decimal_text(value):
    return format(value, "f")


def common(i):
    """The values every format writes for record i, and their expected text."""
    big = [-9223372036854775808, 9223372036854775807, 0, -1, 1234567890123]
    at = EPOCH + dt.timedelta(days=20000 + i, microseconds=123456 * (i + 1) + i)
    return {
        "id": i,
        "i": (i * 7919) % 100000 - 50000,
        "l": big[i % len(big)] if i < len(big) else i * 1_000_003,
        "d": i * 0.1,
        "f": i + 0.5,
        "b": i % 2 == 0,
        "s": 'row %d "quoted" \\ ünï €' % i,
        "raw": bytes([(i + k) % 256 for k in range(1 + i % 7)]),
        "at": at,
        "tags": ["t%d" % k for k in range(i % 4)],
    }


def expected_common(v):
    return {
        "id": str(v["id"]),
        "i": str(v["i"]),
        "l": str(v["l"]),
        "d": pg_float(v["d"]),
        "f": pg_float(v["f"]),
        "b": "true" if v["b"] else "false",
        "s": v["s"],
        "raw": "\\x" + v["raw"].hex(),
        "tags": json.dumps(v["tags"], separators=(",", ":")),
    }


def avro_record(i, version):
    v = common(i)
    scale9 = decimal.Decimal(i * 1_000_000_007 - 5_000_000_000).scaleb(-9)
    if i == 2:
        scale9 = decimal.Decimal("12345678901234567890123456789.123456789")
    if i == 3:
        scale9 = decimal.Decimal("-0.000000001")
    fixed4 = decimal.Decimal(-i * 12345).scaleb(-4)
    day = EPOCH_DAY + dt.timedelta(days=i * 37 - 4000)
    tmillis = (i * 3_601_234) % 86_400_000
    tmicros = (i * 3_601_234_567) % 86_400_000_000
    local = dt.datetime(2001, 2, 3, 4, 5, 6) + dt.timedelta(seconds=i * 3599, microseconds=i * 11)
    local_ms = local.replace(microsecond=local.microsecond // 1000 * 1000)
    at_ms = v["at"].replace(microsecond=v["at"].microsecond // 1000 * 1000)
    colors = ["RED", "GREEN", "BLUE"]
    record = {
        "id": v["id"], "i": v["i"], "l": v["l"], "d": v["d"], "f": v["f"], "b": v["b"],
        "s": v["s"], "raw": v["raw"], "amount": scale9, "fixed_amount": fixed4, "day": day,
        "tmillis": dt.time(tmillis // 3_600_000, tmillis // 60_000 % 60, tmillis // 1000 % 60,
                           tmillis % 1000 * 1000),
        "tmicros": dt.time(tmicros // 3_600_000_000, tmicros // 60_000_000 % 60,
                           tmicros // 1_000_000 % 60, tmicros % 1_000_000),
        "tsmillis": at_ms, "tsmicros": v["at"], "local_ms": local_ms, "local_us": local,
        "uid": str(uuid.UUID(int=i * 0x1000000000001 + 7)), "color": colors[i % 3],
        "maybe": None if i % 3 == 0 else "m%d" % i,
        "inner": {"n": i * 3, "label": "inner %d" % i},
        "tags": v["tags"], "attrs": {"k%d" % k: "v%d" % (i + k) for k in range(i % 3)},
    }
    if version == 1:
        record["dropped"] = "gone %d" % i
    else:
        record["added"] = "new %d" % i
    expected = expected_common(v)
    local_micros = (local - dt.datetime(1970, 1, 1)) // dt.timedelta(microseconds=1)
    local_ms_micros = (local_ms - dt.datetime(1970, 1, 1)) // dt.timedelta(microseconds=1)
    expected.update({
        "amount": decimal_text(scale9), "fixed_amount": decimal_text(fixed4),
        "day": day.isoformat(), "tmillis": pg_time(tmillis * 1000), "tmicros": pg_time(tmicros),
        "tsmillis": str(micros(at_ms)), "tsmicros": str(micros(v["at"])),
        "local_ms": str(local_ms_micros), "local_us": str(local_micros),
        "uid": record["uid"], "color": record["color"],
        "maybe": "NULL" if record["maybe"] is None else record["maybe"],
        "inner_n": str(i * 3), "inner_label": "inner %d" % i,
        "attrs": pg_jsonb(record["attrs"]),
        "added": "NULL" if version == 1 else "new %d" % i,
    })
    return record, expected


def avro_serializer(client, version):
    from confluent_kafka.schema_registry.avro import AvroSerializer
    with open(os.path.join(HERE, "everything.v%d.avsc" % version)) as f:
        schema = f.read()
    return AvroSerializer(client, schema, lambda obj, ctx: obj)


def protobuf_module():
    """everything.proto compiled by grpcio-tools' protoc into a temporary module."""
    out = tempfile.mkdtemp(prefix="sluice-pb-")
    from grpc_tools import protoc
    import grpc_tools
    include = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    code = protoc.main(["protoc", "-I" + HERE, "-I" + include, "--python_out=" + out,
                        os.path.join(HERE, "everything.proto")])
    if code != 0:
        sys.exit("protoc failed: %d" % code)
    sys.path.insert(0, out)
    return importlib.import_module("everything_pb2")


def protobuf_record(i, pb):
    from google.protobuf import struct_pb2
    v = common(i)
    message = pb.Everything()
    message.id = v["id"]
    message.i = v["i"]
    message.l = v["l"]
    u = [18446744073709551615, 0, 9223372036854775808][i % 3] if i < 3 else i * 1_000_000_007
    message.u = u
    message.si = -v["i"]
    message.d = v["d"]
    message.f = v["f"]
    message.b = v["b"]
    message.s = v["s"]
    message.raw = v["raw"]
    message.color = i % 3
    message.inner.n = i * 3
    message.inner.label = "inner %d" % i
    message.tags.extend(v["tags"])
    counts = {"c%d" % k: -k * 10_000_000_000 for k in range(i % 3)}
    for key, value in counts.items():
        message.counts[key] = value
    if i % 2 == 0:
        message.text = "text %d" % i
    else:
        message.number = -i * 1_000_000_000_000
    message.at.FromMicroseconds(micros(v["at"]))
    took_micros = i * 1_500_001
    message.took.FromMicroseconds(took_micros)
    if i % 3 != 0:
        message.note.value = "note %d" % i
    message.big.value = 9223372036854775807 - i
    extra = struct_pb2.Struct()
    extra.update({"n": i + 0.5, "ok": i % 2 == 0, "name": "x%d" % i})
    message.extra.CopyFrom(extra)
    expected = expected_common(v)
    expected.update({
        "u": str(u), "si": str(-v["i"]), "color": ["RED", "GREEN", "BLUE"][i % 3],
        "inner_n": str(i * 3), "inner_label": "inner %d" % i,
        "counts": pg_jsonb(counts),
        "text": "text %d" % i if i % 2 == 0 else "NULL",
        "number": str(-i * 1_000_000_000_000) if i % 2 == 1 else "NULL",
        "at": str(micros(v["at"])),
        "took": "%d.%06d" % divmod(took_micros, 1_000_000),
        "note": "note %d" % i if i % 3 != 0 else "NULL",
        "big": str(9223372036854775807 - i),
        "extra": pg_jsonb({"n": i + 0.5, "ok": i % 2 == 0, "name": "x%d" % i}),
    })
    return message, expected


def json_record(i):
    v = common(i)
    amount = decimal.Decimal(i * 1_000_007).scaleb(-3)
    record = {
        "id": v["id"], "i": v["i"], "l": v["l"], "d": v["d"], "b": v["b"], "s": v["s"],
        "at": v["at"].isoformat().replace("+00:00", "Z"),
        "day": (EPOCH_DAY + dt.timedelta(days=i)).isoformat(),
        "amount": str(amount),
        "tags": v["tags"],
    }
    expected = {k: expected_common(v)[k] for k in ("id", "i", "l", "d", "b", "s", "tags")}
    expected.update({
        "at": str(micros(v["at"])),
        "day": record["day"],
        "amount": decimal_text(amount),
    })
    return record, expected


def main():
    fmt, topic, first, count, out = sys.argv[1:6]
    version = int(sys.argv[6]) if len(sys.argv) > 6 else 1
    first, count = int(first), int(count)
    client = SchemaRegistryClient({"url": os.environ["SCHEMA_REGISTRY_URL"]})
    producer = Producer({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"],
                         "linger.ms": 20, "enable.idempotence": True})
    keys = StringSerializer("utf_8")
    if fmt == "avro":
        serializer = avro_serializer(client, version)
        make = lambda i: avro_record(i, version)
    elif fmt == "protobuf":
        from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
        pb = protobuf_module()
        serializer = ProtobufSerializer(pb.Everything, client, {"use.deprecated.format": False})
        make = lambda i: protobuf_record(i, pb)
    elif fmt == "json":
        from confluent_kafka.schema_registry.json_schema import JSONSerializer
        with open(os.path.join(HERE, "everything.schema.json")) as f:
            serializer = JSONSerializer(f.read(), client, lambda obj, ctx: obj)
        make = json_record
    else:
        sys.exit("unknown format " + fmt)
    expected = {}
    for i in range(first, first + count):
        record, row = make(i)
        value = serializer(record, SerializationContext(topic, MessageField.VALUE))
        producer.produce(topic, key=keys(str(i)), value=value)
        for column, text in row.items():
            expected.setdefault(column, []).append(text)
        producer.poll(0)
    left = producer.flush(60)
    if left:
        sys.exit("%d records not delivered" % left)
    with open(out, "w") as f:
        json.dump(expected, f)


if __name__ == "__main__":
    main()
