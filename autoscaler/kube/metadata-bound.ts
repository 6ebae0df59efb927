import type { ServiceDefinition } from "@grpc/grpc-js";

/**
 * How many entries a ScaledObjectRef's `scalerMetadata` may have, counted on the wire before
 * grpc-js decodes the message. A trigger's metadata is a few keys (`model`, `targetDemand`, KEDA's
 * `scalerAddress`, `enableTLS`, `unsafeSsl`, and `…FromEnv` forms), and any other key is refused
 * anyway; but grpc-js decodes the whole message before a handler sees it, and 300,000 small
 * entries fit in the 4 MB a message may have: decoding them took 0.6-0.8 s of the autoscaler's
 * event loop, once per call, from anyone who could reach the gRPC port. Counting them costs a few
 * milliseconds and builds nothing.
 */
export const maxMetadataEntries = 64;

/** ScaledObjectRef's `scalerMetadata` (a map: one length-delimited field 3 per entry). */
const metadataField = 3;
/** GetMetricsRequest's `scaledObjectRef`. */
const refField = 1;

/**
 * Walks the fields of one protobuf message in `bytes[start, end)`, calling `each` with the bounds
 * of every length-delimited one. False when the bytes are not a well-formed message (the decoder
 * then says so as before).
 */
function walk(
  bytes: Uint8Array,
  start: number,
  end: number,
  each: (field: number, from: number, to: number) => boolean,
): boolean {
  let at = start;
  const varint = (): number | undefined => {
    let value = 0;
    for (let shift = 0; at < end && shift < 64; shift += 7) {
      const byte = bytes[at++]!;
      value += (byte & 0x7f) * 2 ** shift;
      if (byte < 0x80) return value;
    }
    return undefined;
  };
  while (at < end) {
    const tag = varint();
    if (tag === undefined) return false;
    const wire = tag % 8;
    if (wire === 0) {
      if (varint() === undefined) return false;
    } else if (wire === 1) at += 8;
    else if (wire === 5) at += 4;
    else if (wire === 2) {
      const length = varint();
      if (length === undefined || at + length > end) return false;
      if (!each(Math.floor(tag / 8), at, at + length)) return false;
      at += length;
    } else return false;
  }
  return at === end;
}

/**
 * The metadata entries of an encoded ScaledObjectRef, or of the refs of an encoded
 * GetMetricsRequest (`nested`; an embedded message given twice is merged, so their entries add
 * up); undefined when the bytes are malformed.
 */
export function metadataEntries(bytes: Uint8Array, nested: boolean): number | undefined {
  let entries = 0;
  const inRef = (field: number) => {
    if (field === metadataField) entries++;
    return true;
  };
  const ok = walk(bytes, 0, bytes.length, (field, from, to) =>
    nested ? field !== refField || walk(bytes, from, to, inRef) : inRef(field),
  );
  return ok ? entries : undefined;
}

/**
 * What the handlers get instead of a ScaledObjectRef whose metadata has too many entries: no
 * metadata, and how many entries it had (scalerTargetOf refuses it, naming `scalerMetadata`).
 */
export interface OversizedRef {
  scalerMetadata: Record<string, string>;
  metadataEntries: number;
}

/**
 * A request deserializer that counts the metadata entries first and decodes only a message with
 * at most maxMetadataEntries; past that it gives an OversizedRef (in `scaledObjectRef` when
 * `nested`), so the call is refused as INVALID_ARGUMENT rather than failed as INTERNAL.
 */
export function boundedDeserializer(
  decode: (bytes: Buffer) => unknown,
  nested: boolean,
): (bytes: Buffer) => unknown {
  return (bytes) => {
    const entries = metadataEntries(bytes, nested);
    if (entries === undefined || entries <= maxMetadataEntries) return decode(bytes);
    const ref: OversizedRef = { scalerMetadata: {}, metadataEntries: entries };
    return nested ? { scaledObjectRef: ref, metricName: "" } : ref;
  };
}

/** A method as proto-loader defines it: grpc-js's, and the name of its request message. */
type LoadedMethod = ServiceDefinition[string] & { requestType?: { type?: { name?: string } } };

/**
 * The service with bounded deserializers on the methods whose request is a ScaledObjectRef or a
 * GetMetricsRequest (by their message's name, so a method KEDA adds with another is left as it is),
 * StreamMetricSpec included: grpc-js decodes a request even for a method it answers UNIMPLEMENTED.
 */
export function boundedService(service: ServiceDefinition): ServiceDefinition {
  const bounded: Record<string, LoadedMethod> = {};
  for (const [name, method] of Object.entries(service) as [string, LoadedMethod][]) {
    const request = method.requestType?.type?.name;
    bounded[name] =
      request === "ScaledObjectRef" || request === "GetMetricsRequest"
        ? {
            ...method,
            requestDeserialize: boundedDeserializer(method.requestDeserialize, request !== "ScaledObjectRef"),
          }
        : method;
  }
  return bounded as ServiceDefinition;
}
