import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { type FormPart, maxFormParts, readForm, textOf, withFieldValue } from "./form.ts";

/** A form as a client (undici's FormData encoder) encodes it. */
async function encoded(form: FormData): Promise<{ body: Buffer; contentType: string }> {
  const request = new Request("http://form.invalid/", { method: "POST", body: form });
  return {
    body: Buffer.from(await request.arrayBuffer()),
    contentType: request.headers.get("content-type")!,
  };
}

async function fields(count: number) {
  const form = new FormData();
  for (let i = 0; i < count; i++) form.append(`f${i}`, "x");
  return encoded(form);
}

const boundary = "----b0undary";
const contentType = `multipart/form-data; boundary=${boundary}`;
const part = (headers: string, content: Buffer | string) =>
  Buffer.concat([
    Buffer.from(`--${boundary}\r\n${headers}\r\n\r\n`),
    Buffer.from(content),
    Buffer.from("\r\n"),
  ]);
const end = Buffer.from(`--${boundary}--\r\n`);
const named = (body: Buffer, parts: FormPart[]) =>
  parts.map((p) => ({ name: p.name, filename: p.filename, text: textOf(body, p) }));

describe("readForm", () => {
  test("reads what a client's encoder writes: text fields, a file with its bytes", async () => {
    const form = new FormData();
    form.append("model", "qwen");
    form.append("file", new Blob([new Uint8Array([0, 13, 10, 45, 45, 255])]), "a.wav");
    form.append("language", "fr ✓");
    const { body, contentType } = await encoded(form);
    const parts = readForm(body, contentType);
    expect(named(body, parts)).toEqual([
      { name: "model", filename: undefined, text: "qwen" },
      { name: "file", filename: "a.wav", text: undefined },
      { name: "language", filename: undefined, text: "fr ✓" },
    ]);
    expect([...body.subarray(parts[1]!.start, parts[1]!.end)]).toEqual([0, 13, 10, 45, 45, 255]);
  });

  test("takes what the engine's parser takes: escaped quotes (Go's mime/multipart), a preamble, padding, a token name, an empty part", () => {
    // Found by an outside tester: undici's parser refused `filename="a \"b\".wav"`, which Go
    // clients send and vLLM reads.
    const body = Buffer.concat([
      Buffer.from("a preamble\r\n"),
      part('Content-Disposition: form-data; name="file"; filename="a \\"b\\".wav"', "RIFF"),
      Buffer.from(`--${boundary} \t\r\nContent-Disposition: form-data; name=model\r\n\r\nq\r\n`),
      part('content-disposition: form-data; filename="x; name=evil"; name="prompt"', ""),
      end,
    ]);
    expect(named(body, readForm(body, contentType))).toEqual([
      { name: "file", filename: 'a "b".wav', text: undefined },
      { name: "model", filename: undefined, text: "q" },
      { name: "prompt", filename: "x; name=evil", text: undefined },
    ]);
  });

  test("reads every form undici's encoder writes as undici's own parser does (names, filenames, text, file bytes)", async () => {
    // Names and filenames without the characters the encoder escapes (`"` as %22, CR, LF) or that
    // a quoted-string escapes (`\\`): undici's parser decodes %22, the engine's does not, and only
    // `model` and `stream` are looked up.
    const label = fc.string({ minLength: 1, maxLength: 12, unit: fc.constantFrom(..."ab z.é✓-_/;=") });
    const entry = fc.record({
      name: label,
      text: fc.option(fc.string({ maxLength: 40 }), { nil: undefined }),
      file: fc.uint8Array({ maxLength: 64 }),
      filename: label,
    });
    await fc.assert(
      fc.asyncProperty(fc.array(entry, { minLength: 1, maxLength: 8 }), async (entries) => {
        const form = new FormData();
        for (const e of entries)
          if (e.text !== undefined) form.append(e.name, e.text);
          else form.append(e.name, new Blob([e.file]), e.filename);
        const { body, contentType } = await encoded(form);
        const theirs = [
          ...(await new Response(body, { headers: { "content-type": contentType } }).formData()),
        ];
        const ours = readForm(body, contentType);
        expect(ours.map((p) => p.name)).toEqual(theirs.map(([name]) => name));
        for (const [i, [, value]] of theirs.entries()) {
          const p = ours[i]!;
          if (typeof value === "string") expect(textOf(body, p)).toBe(value);
          else {
            expect(p.filename).toBe((value as File).name);
            expect(body.subarray(p.start, p.end)).toEqual(Buffer.from(await value.arrayBuffer()));
          }
        }
      }),
      { numRuns: 200 },
    );
  });

  test("refuses, saying why: no boundary, cut short, headers without an end, a part naming no field", () => {
    const model = part('Content-Disposition: form-data; name="model"', "q");
    expect(() => readForm(Buffer.concat([model, end]), "multipart/form-data")).toThrow("names no boundary");
    expect(() => readForm(Buffer.from("no parts here"), contentType)).toThrow(
      "no part starts with the boundary",
    );
    expect(() => readForm(model, contentType)).toThrow("cut short");
    expect(() => readForm(Buffer.from(`--${boundary}`), contentType)).toThrow("cut short");
    expect(() =>
      readForm(
        Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="m"\r\nq\r\n--${boundary}--`),
        contentType,
      ),
    ).toThrow("headers do not end");
    expect(() => readForm(Buffer.concat([part("Content-Type: text/plain", "q"), end]), contentType)).toThrow(
      "has no `Content-Disposition",
    );
    expect(() =>
      readForm(Buffer.concat([part("Content-Disposition: attachment; name=m", "q"), end]), contentType),
    ).toThrow("has no `Content-Disposition");
  });

  test("a form of up to maxFormParts parts is read; more are refused before anything else is", async () => {
    // Found by an outside tester: a 33 MB form of 280,000 small fields stalled /healthz for 5 s.
    const most = await fields(maxFormParts);
    expect(readForm(most.body, most.contentType)).toHaveLength(maxFormParts);
    const over = await fields(maxFormParts + 1);
    expect(() => readForm(over.body, over.contentType)).toThrow(`more than ${maxFormParts} parts`);
  });
});

describe("withFieldValue", () => {
  const form = (first: string, last: string) =>
    Buffer.concat([
      part('Content-Disposition: form-data; name="model"', first),
      // A text field in Latin-1 (0xE9), a file part with no Content-Type and a header of its own.
      part(
        'Content-Disposition: form-data; name="prompt"\r\nContent-Type: text/plain; charset=iso-8859-1',
        Buffer.from([0x63, 0x61, 0x66, 0xe9]),
      ),
      part(
        'Content-Disposition: form-data; name="model"; filename="a \\"b\\".wav"\r\nX-Extra: 1',
        Buffer.from([0, 1, 2, 255]),
      ),
      part('Content-Disposition: form-data; name="model"', last),
      end,
    ]);
  const set = (body: Buffer, type: string, field: string, value: string) =>
    withFieldValue(body, readForm(body, type), field, value);

  test("only the `model` text fields' values change (all of them, as FormData.set); every other byte is the client's", () => {
    // Found by an outside tester: encoding the form again turned Latin-1 into U+FFFD, gave a file
    // part with no Content-Type `text/plain`, and dropped part headers.
    expect(set(form("q", "q"), contentType, "model", "Qwen/Qwen3-8B")).toEqual(
      form("Qwen/Qwen3-8B", "Qwen/Qwen3-8B"),
    );
  });

  test("a quoted boundary; no such field: undefined; the new name reads back", () => {
    const quoted = `multipart/form-data; boundary="${boundary}"`;
    expect(set(form("a", "q"), quoted, "model", "x")).toEqual(form("x", "x"));
    expect(set(form("a", "q"), contentType, "language", "en")).toBeUndefined();
    const renamed = set(form("a", "q"), contentType, "model", "Qwen/Qwen3-8B")!;
    const texts = readForm(renamed, contentType)
      .filter((p) => p.name === "model")
      .map((p) => textOf(renamed, p));
    expect(texts).toEqual(["Qwen/Qwen3-8B", undefined, "Qwen/Qwen3-8B"]);
  });
});
