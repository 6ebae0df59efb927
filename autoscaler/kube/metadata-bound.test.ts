import { fileURLToPath } from "node:url";
import { loadPackageDefinition, type ServiceDefinition } from "@grpc/grpc-js";
import { loadSync } from "@grpc/proto-loader";
import { describe, expect, it } from "vitest";
import { boundedService, maxMetadataEntries, metadataEntries } from "./metadata-bound.ts";

const protoPath = fileURLToPath(new URL("./externalscaler.proto", import.meta.url));
const service = (
  loadPackageDefinition(
    loadSync(protoPath, { keepCase: true, longs: Number, defaults: true }),
  ) as unknown as {
    externalscaler: { ExternalScaler: { service: ServiceDefinition } };
  }
).externalscaler.ExternalScaler.service;

const metadata = (entries: number) =>
  Object.fromEntries(Array.from({ length: entries }, (_, i) => [`key-${i}`, `value-${i}`]));
const ref = (entries: number) => ({ name: "qwen", namespace: "ml", scalerMetadata: metadata(entries) });
const encodeRef = (entries: number) => service.IsActive!.requestSerialize(ref(entries));

describe("counting a ScaledObjectRef's metadata on the wire", () => {
  it("counts the entries of a ref, and of the ref in a GetMetricsRequest", () => {
    for (const entries of [0, 1, 64, 1_000]) {
      expect(metadataEntries(encodeRef(entries), false)).toBe(entries);
      const request = service.GetMetrics!.requestSerialize({
        scaledObjectRef: ref(entries),
        metricName: "snooze-demand",
      });
      expect(metadataEntries(request, true)).toBe(entries);
    }
  });

  it("adds up the entries of a ref given twice (protobuf merges them), and reads nothing else as entries", () => {
    const twice = Buffer.concat([
      service.GetMetrics!.requestSerialize({ scaledObjectRef: ref(40) }),
      service.GetMetrics!.requestSerialize({ scaledObjectRef: ref(30), metricName: "x".repeat(300) }),
    ]);
    expect(metadataEntries(twice, true)).toBe(70);
    // A long name and namespace are fields 1 and 2, not entries.
    const long = service.IsActive!.requestSerialize({
      name: "n".repeat(100_000),
      namespace: "s".repeat(300),
    });
    expect(metadataEntries(long, false)).toBe(0);
  });

  it("says nothing of bytes that are no message: the decoder then refuses them as before", () => {
    const bytes = encodeRef(3);
    expect(metadataEntries(bytes.subarray(0, bytes.length - 1), false)).toBeUndefined();
    expect(metadataEntries(Buffer.from([0x1a, 0xff]), false)).toBeUndefined();
    expect(metadataEntries(Buffer.from([0x0b]), false)).toBeUndefined(); // a group: not proto3
  });
});

describe("the service's bounded deserializers", () => {
  const bounded = boundedService(service);

  it("decode a ref of up to the limit as before, on every method that takes one", () => {
    for (const method of ["IsActive", "StreamIsActive", "GetMetricSpec", "StreamMetricSpec"]) {
      expect(bounded[method]!.requestDeserialize(encodeRef(maxMetadataEntries))).toEqual(
        ref(maxMetadataEntries),
      );
    }
    const request = { scaledObjectRef: ref(2), metricName: "snooze-demand" };
    expect(bounded.GetMetrics!.requestDeserialize(service.GetMetrics!.requestSerialize(request))).toEqual(
      request,
    );
  });

  it("past it, give no metadata and the count instead, on every method (StreamMetricSpec too, which grpc-js decodes to answer UNIMPLEMENTED)", () => {
    const over = maxMetadataEntries + 1;
    for (const method of ["IsActive", "StreamIsActive", "GetMetricSpec", "StreamMetricSpec"])
      expect(bounded[method]!.requestDeserialize(encodeRef(over))).toEqual({
        scalerMetadata: {},
        metadataEntries: over,
      });
    const request = service.GetMetrics!.requestSerialize({ scaledObjectRef: ref(over), metricName: "m" });
    expect(bounded.GetMetrics!.requestDeserialize(request)).toEqual({
      scaledObjectRef: { scalerMetadata: {}, metadataEntries: over },
      metricName: "",
    });
  });
});
