"""Registry smoke test: the Confluent client's serializers against the stack's registry.

Run by scripts/registry-smoke with the stack's environment (KAFKA_BOOTSTRAP_SERVERS,
SCHEMA_REGISTRY_URL). For each of Avro, Protobuf (a .proto that imports another, compiled
with grpcio-tools at run time, so the schema has a reference) and JSON Schema it produces 3
records to a fresh topic with the Confluent serializer, reads them back raw, prints the
first 6 bytes of each value and the schema id of its wire header, GETs that id from the
registry's Confluent-compatible API and decodes the records with the matching deserializer.
With SCHEMA_REGISTRY_TLS_URL and SLUICE_TLS_CA set it also reads the Avro schema over HTTPS,
verifying the registry's certificate against the stack's CA. Exit 0 when every id resolves
and every record decodes to what was sent; the topics are deleted at the end.
"""

import importlib
import json
import os
import subprocess
import sys
import tempfile
import urllib.request
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

BOOTSTRAP = os.environ["KAFKA_BOOTSTRAP_SERVERS"]
REGISTRY = os.environ["SCHEMA_REGISTRY_URL"]

AVRO_SCHEMA = json.dumps({
    "type": "record", "name": "Smoke", "namespace": "sluice.smoke",
    "fields": [{"name": "id", "type": "int"}, {"name": "name", "type": "string"}],
})
JSON_SCHEMA = json.dumps({
    "$schema": "http://json-schema.org/draft-07/schema#", "title": "Smoke", "type": "object",
    "properties": {"id": {"type": "integer"}, "name": {"type": "string"}},
    "required": ["id", "name"],
})
PROTO_DEP = """syntax = "proto3";
package sluice.smoke;
message Amount { int64 cents = 1; }
"""
PROTO_MAIN = """syntax = "proto3";
package sluice.smoke;
import "smoke_amount.proto";
message Smoke { int32 id = 1; string name = 2; Amount amount = 3; }
"""


def compile_proto(workdir):
    """smoke.proto (importing smoke_amount.proto) -> the generated Smoke message class."""
    for name, text in (("smoke_amount.proto", PROTO_DEP), ("smoke.proto", PROTO_MAIN)):
        with open(os.path.join(workdir, name), "w", encoding="utf-8") as f:
            f.write(text)
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", f"-I{workdir}", f"--python_out={workdir}",
         "smoke_amount.proto", "smoke.proto"],
        check=True,
    )
    sys.path.insert(0, workdir)
    return importlib.import_module("smoke_pb2").Smoke


def registry_get(path):
    with urllib.request.urlopen(REGISTRY + path, timeout=10) as resp:
        return resp.headers.get("Content-Type"), json.loads(resp.read())


def produce(topic, serialize, values):
    producer = Producer({"bootstrap.servers": BOOTSTRAP, "enable.idempotence": True})
    ctx = SerializationContext(topic, MessageField.VALUE)
    for i, value in enumerate(values):
        producer.produce(topic, key=str(i).encode(), value=serialize(value, ctx))
    if producer.flush(30) != 0:
        raise SystemExit(f"{topic}: records still undelivered after 30 s")


def read_raw(topic, count):
    consumer = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": topic,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    out = []
    while len(out) < count:
        msg = consumer.poll(30)
        if msg is None:
            raise SystemExit(f"{topic}: only {len(out)} of {count} records after 30 s")
        if msg.error():
            raise SystemExit(f"{topic}: {msg.error()}")
        out.append(msg.value())
    consumer.close()
    return out


def check_tls(results, schema_id):
    """The schema of schema_id over HTTPS, CA-verified, is the one served over HTTP."""
    url, ca = os.environ.get("SCHEMA_REGISTRY_TLS_URL"), os.environ.get("SLUICE_TLS_CA")
    if not url or not ca:
        print("https    skipped (no SCHEMA_REGISTRY_TLS_URL / SLUICE_TLS_CA)")
        return
    over_tls = SchemaRegistryClient({"url": url, "ssl.ca.location": ca}).get_schema(schema_id)
    plain = SchemaRegistryClient({"url": REGISTRY}).get_schema(schema_id)
    ok = over_tls.schema_str == plain.schema_str
    results.append(ok)
    print(f"https    {url}/schemas/ids/{schema_id} (CA {ca}): {'ok' if ok else 'MISMATCH'}")


def check_format(results, fmt, topic, serializer, deserializer, values, as_dict):
    """Produce values, read them back raw, check each (one result a record); the last id."""
    produce(topic, serializer, values)
    schema_id = None
    ctx = SerializationContext(topic, MessageField.VALUE)
    for raw, sent in zip(read_raw(topic, len(values)), values):
        magic, schema_id = raw[0], int.from_bytes(raw[1:5], "big")
        content_type, body = registry_get(f"/schemas/ids/{schema_id}")
        got = as_dict(deserializer(raw, ctx))
        ok = magic == 0 and "schema" in body and got == as_dict(sent)
        results.append(ok)
        print(f"{fmt:8} {topic}  value[:6]={raw[:6].hex(' ')}  id={schema_id}  "
              f"GET /schemas/ids/{schema_id}: schemaType={body.get('schemaType', '(absent)')} "
              f"references={body.get('references')} ({content_type})  decoded={got}  "
              f"{'ok' if ok else 'MISMATCH'}")
    return schema_id


def main():
    run = uuid.uuid4().hex[:8]
    topics = {fmt: f"registry-smoke-{run}-{fmt}" for fmt in ("avro", "protobuf", "json")}
    admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
    for future in admin.create_topics(
            [NewTopic(t, num_partitions=1, replication_factor=1) for t in topics.values()]).values():
        future.result()
    sr = SchemaRegistryClient({"url": REGISTRY})
    records = [{"id": i, "name": f"smoke {i}"} for i in range(1, 4)]
    results = []
    try:
        avro_id = check_format(
            results, "avro", topics["avro"], AvroSerializer(sr, AVRO_SCHEMA),
            AvroDeserializer(sr), records, lambda v: v)
        with tempfile.TemporaryDirectory() as workdir:
            smoke = compile_proto(workdir)
            messages = [smoke(id=r["id"], name=r["name"]) for r in records]
            for m in messages:
                m.amount.cents = 100 * m.id
            check_format(
                results, "protobuf", topics["protobuf"], ProtobufSerializer(smoke, sr),
                ProtobufDeserializer(smoke), messages, lambda m: (m.id, m.name, m.amount.cents))
        check_format(
            results, "json", topics["json"], JSONSerializer(JSON_SCHEMA, sr),
            JSONDeserializer(JSON_SCHEMA), records, lambda v: v)
        check_tls(results, avro_id)
        _, subjects = registry_get("/subjects")
        print("subjects:", ", ".join(sorted(s for s in subjects if run in s or s.endswith(".proto"))))
    finally:
        for future in admin.delete_topics(list(topics.values())).values():
            future.result()
    failed = results.count(False)
    print(f"{len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
