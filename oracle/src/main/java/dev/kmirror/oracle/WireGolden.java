package dev.kmirror.oracle;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.protocol.types.ArrayOf;
import org.apache.kafka.common.protocol.types.BoundField;
import org.apache.kafka.common.protocol.types.CompactArrayOf;
import org.apache.kafka.common.protocol.types.Field;
import org.apache.kafka.common.protocol.types.NullableSchema;
import org.apache.kafka.common.protocol.types.RawTaggedField;
import org.apache.kafka.common.protocol.types.Schema;
import org.apache.kafka.common.protocol.types.Struct;
import org.apache.kafka.common.protocol.types.TaggedFields;
import org.apache.kafka.common.protocol.types.Type;

import java.io.File;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * Golden bytes of kmirror's transcription of the prototype's message schemas, written by Apache
 * Kafka's own runtime protocol types.
 *
 * <p>Usage: {@code WireGolden <cases.json>}. The file holds {@code {"cases": [{"schema": S,
 * "version": V, "samples": [{"name": N, "value": X}]}]}}, where S is a schema in the shape of
 * Kafka's message JSON ({@code name}, {@code validVersions}, {@code flexibleVersions}, fields
 * with {@code name}, {@code type}, {@code versions}, {@code nullableVersions},
 * {@code taggedVersions}, {@code tag}, {@code default}, {@code ignorable} and nested
 * {@code fields}). For each case this program decides from S alone, by the message generator's
 * rules, which fields exist at V, which are tagged, which may be null and whether lengths are
 * compact; builds the matching {@link Schema} out of {@link Type#INT8}, {@link
 * Type#COMPACT_STRING}, {@link CompactArrayOf}, {@link TaggedFields}, {@link NullableSchema}
 * and the rest; fills a {@link Struct} with X (tagged fields only when they differ from their
 * default, unknown tagged fields as {@link RawTaggedField}); serializes it; reads it back with
 * the same schema and writes it again (the same bytes); and prints {@code <message> TAB <version> TAB <sample> TAB <hex>} per sample.
 *
 * <p>Values: integers and floats as JSON numbers, strings as strings, bytes and UUIDs as hex
 * strings (a UUID's 16 bytes, most significant first), arrays as arrays, structs as objects by
 * field name with an optional {@code "_unknownTaggedFields": [{"tag": T, "data": hex}]}.
 */
public final class WireGolden {
    private WireGolden() {}

    public static void main(String[] args) throws Exception {
        JsonNode root = new ObjectMapper().readTree(new File(args[0]));
        StringBuilder out = new StringBuilder();
        for (JsonNode c : root.get("cases")) {
            JsonNode schemaJson = c.get("schema");
            int version = c.get("version").asInt();
            String name = schemaJson.get("name").asText();
            if (!versions(schemaJson, "validVersions").contains(version))
                throw new IllegalArgumentException(name + " has no version " + version);
            boolean flexible = versions(schemaJson, "flexibleVersions").contains(version);
            Schema schema = schemaFor(schemaJson.get("fields"), version, flexible);
            for (JsonNode sample : c.get("samples")) {
                String sampleName = sample.get("name").asText();
                Struct struct = structFor(schema, schemaJson.get("fields"), sample.get("value"),
                    version, flexible, name + "/" + sampleName);
                ByteBuffer buffer = ByteBuffer.allocate(struct.sizeOf());
                struct.writeTo(buffer);
                if (buffer.hasRemaining())
                    throw new IllegalStateException(name + "/" + sampleName + ": sizeOf disagrees with write");
                buffer.flip();
                byte[] bytes = new byte[buffer.remaining()];
                buffer.duplicate().get(bytes);
                // Kafka reads its bytes back and writes the same bytes again.
                Struct back = schema.read(buffer);
                ByteBuffer again = ByteBuffer.allocate(back.sizeOf());
                back.writeTo(again);
                if (buffer.hasRemaining() || !java.util.Arrays.equals(again.array(), bytes))
                    throw new IllegalStateException(name + "/" + sampleName + ": Kafka does not read back what it wrote");
                out.append(name).append('\t').append(version).append('\t').append(sampleName)
                    .append('\t').append(hex(bytes)).append('\n');
            }
        }
        System.out.print(out);
        System.out.flush();
    }

    /** A version range in Kafka's spelling: none, N, N+, L-H. */
    private record Range(int lo, int hi) {
        boolean contains(int v) {
            return lo <= v && v <= hi;
        }
    }

    private static Range versions(JsonNode node, String key) {
        JsonNode v = node.get(key);
        if (v == null || v.isNull()) return new Range(0, -1);
        String s = v.asText().trim();
        if (s.equals("none")) return new Range(0, -1);
        if (s.endsWith("+")) return new Range(Integer.parseInt(s.substring(0, s.length() - 1)), Short.MAX_VALUE);
        int dash = s.indexOf('-');
        if (dash > 0) return new Range(Integer.parseInt(s.substring(0, dash)), Integer.parseInt(s.substring(dash + 1)));
        int n = Integer.parseInt(s);
        return new Range(n, n);
    }

    private static boolean taggedAt(JsonNode field, int version) {
        return field.has("tag") && versions(field, "taggedVersions").contains(version);
    }

    /** The runtime schema of a struct at a version. */
    private static Schema schemaFor(JsonNode fields, int version, boolean flexible) {
        List<Field> fixed = new ArrayList<>();
        Map<Integer, Field> tagged = new TreeMap<>();
        for (JsonNode f : fields) {
            if (!versions(f, "versions").contains(version)) continue;
            boolean nullable = versions(f, "nullableVersions").contains(version);
            Type type = typeFor(f, f.get("type").asText(), version, flexible, nullable);
            Field field = new Field(f.get("name").asText(), type, "");
            if (taggedAt(f, version)) tagged.put(f.get("tag").asInt(), field);
            else fixed.add(field);
        }
        if (flexible) fixed.add(new Field.TaggedFieldsSection(new TaggedFields(tagged)));
        return new Schema(fixed.toArray(new Field[0]));
    }

    private static Type typeFor(JsonNode field, String type, int version, boolean flexible, boolean nullable) {
        if (type.startsWith("[]")) {
            Type element = typeFor(field, type.substring(2), version, flexible, false);
            if (flexible) return nullable ? CompactArrayOf.nullable(element) : new CompactArrayOf(element);
            return nullable ? ArrayOf.nullable(element) : new ArrayOf(element);
        }
        switch (type) {
            case "bool": return Type.BOOLEAN;
            case "int8": return Type.INT8;
            case "int16": return Type.INT16;
            case "uint16": return Type.UINT16;
            case "int32": return Type.INT32;
            case "uint32": return Type.UNSIGNED_INT32;
            case "int64": return Type.INT64;
            case "float64": return Type.FLOAT64;
            case "uuid": return Type.UUID;
            case "string":
                if (flexible) return nullable ? Type.COMPACT_NULLABLE_STRING : Type.COMPACT_STRING;
                return nullable ? Type.NULLABLE_STRING : Type.STRING;
            case "bytes":
                if (flexible) return nullable ? Type.COMPACT_NULLABLE_BYTES : Type.COMPACT_BYTES;
                return nullable ? Type.NULLABLE_BYTES : Type.BYTES;
            default:
                Schema struct = schemaFor(field.get("fields"), version, flexible);
                return nullable ? new NullableSchema(struct) : struct;
        }
    }

    private static Struct structFor(Schema schema, JsonNode fields, JsonNode value, int version, boolean flexible, String path) {
        Struct struct = new Struct(schema);
        TreeMap<Integer, Object> tagged = new TreeMap<>();
        Map<Integer, Field> taggedFields = Map.of();
        BoundField section = flexible ? schema.get("_tagged_fields") : null;
        if (section != null) taggedFields = ((TaggedFields) section.def.type).fields();
        for (JsonNode f : fields) {
            String name = f.get("name").asText();
            JsonNode v = value.get(name);
            JsonNode def = f.get("default");
            if (v == null) throw new IllegalArgumentException(path + ": no value for " + name);
            if (!versions(f, "versions").contains(version)) {
                boolean ignorable = f.has("ignorable") && f.get("ignorable").asBoolean();
                if (!ignorable && !v.equals(def))
                    throw new IllegalArgumentException(path + ": non-default " + name + " absent at version " + version);
                continue;
            }
            if (taggedAt(f, version)) {
                int tag = f.get("tag").asInt();
                if (!v.equals(def)) tagged.put(tag, valueFor(taggedFields.get(tag).type, f, v, version, flexible, path + "." + name));
            } else {
                struct.set(name, valueFor(schema.get(name).def.type, f, v, version, flexible, path + "." + name));
            }
        }
        JsonNode unknown = value.get("_unknownTaggedFields");
        if (unknown != null) {
            if (!flexible) throw new IllegalArgumentException(path + ": tagged fields in a non-flexible version");
            for (JsonNode raw : unknown) {
                int tag = raw.get("tag").asInt();
                if (tagged.containsKey(tag)) throw new IllegalArgumentException(path + ": tag " + tag + " twice");
                tagged.put(tag, new RawTaggedField(tag, unhex(raw.get("data").asText())));
            }
        }
        if (flexible) struct.set("_tagged_fields", tagged);
        return struct;
    }

    private static Object valueFor(Type type, JsonNode field, JsonNode v, int version, boolean flexible, String path) {
        if (v.isNull()) return null;
        if (type instanceof Schema schema) return structFor(schema, field.get("fields"), v, version, flexible, path);
        if (type.isArray()) {
            Type element = type.arrayElementType().orElseThrow();
            Object[] items = new Object[v.size()];
            Iterator<JsonNode> it = v.elements();
            for (int i = 0; it.hasNext(); i++) items[i] = valueFor(element, field, it.next(), version, flexible, path + "[" + i + "]");
            return items;
        }
        if (type == Type.BOOLEAN) return v.asBoolean();
        if (type == Type.INT8) return (byte) v.asInt();
        if (type == Type.INT16) return (short) v.asInt();
        if (type == Type.UINT16) return v.asInt();
        if (type == Type.INT32) return v.asInt();
        if (type == Type.UNSIGNED_INT32) return v.asLong();
        if (type == Type.INT64) return v.asLong();
        if (type == Type.FLOAT64) return v.asDouble();
        if (type == Type.UUID) {
            ByteBuffer b = ByteBuffer.wrap(unhex(v.asText()));
            return new Uuid(b.getLong(), b.getLong());
        }
        if (type == Type.STRING || type == Type.COMPACT_STRING || type == Type.NULLABLE_STRING
            || type == Type.COMPACT_NULLABLE_STRING) return v.asText();
        if (type == Type.BYTES || type == Type.COMPACT_BYTES || type == Type.NULLABLE_BYTES
            || type == Type.COMPACT_NULLABLE_BYTES) return ByteBuffer.wrap(unhex(v.asText()));
        throw new IllegalArgumentException(path + ": unsupported type " + type);
    }

    private static String hex(byte[] bytes) {
        StringBuilder s = new StringBuilder(bytes.length * 2);
        for (byte b : bytes) s.append(String.format("%02x", b & 0xff));
        return s.toString();
    }

    private static byte[] unhex(String s) {
        byte[] out = new byte[s.length() / 2];
        for (int i = 0; i < out.length; i++) out[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
        return out;
    }
}
