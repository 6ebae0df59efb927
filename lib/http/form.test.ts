import { describe, expect, test } from "vitest";
import { maxFormParts, parseForm, withFieldValue } from "./form.ts";

/** A form as a client encodes it, with `fields` small text fields. */
async function encoded(fields: number): Promise<{ body: Buffer; contentType: string }> {
  const form = new FormData();
  for (let i = 0; i < fields; i++) form.append(`f${i}`, "x");
  const request = new Request("http://form.invalid/", { method: "POST", body: form });
  return {
    body: Buffer.from(await request.arrayBuffer()),
    contentType: request.headers.get("content-type")!,
  };
}

describe("parseForm", () => {
  test("a form of up to maxFormParts parts is parsed", async () => {
    const { body, contentType } = await encoded(maxFormParts);
    expect([...(await parseForm(body, contentType)).keys()]).toHaveLength(maxFormParts);
  });

  test("more parts are refused before parsing: the parser would hold the event loop", async () => {
    // Found by an outside tester: a 33 MB form of 280,000 small fields stalled /healthz for 5 s.
    const { body, contentType } = await encoded(maxFormParts + 1);
    await expect(parseForm(body, contentType)).rejects.toThrow(`more than ${maxFormParts} parts`);
  });
});

describe("withFieldValue", () => {
  const boundary = "----b0undary";
  const contentType = `multipart/form-data; boundary=${boundary}`;
  const part = (headers: string, content: Buffer | string) =>
    Buffer.concat([
      Buffer.from(`--${boundary}\r\n${headers}\r\n\r\n`),
      Buffer.from(content),
      Buffer.from("\r\n"),
    ]);
  const form = (first: string, last: string) =>
    Buffer.concat([
      part('Content-Disposition: form-data; name="model"', first),
      // A text field in Latin-1 (0xE9), a file part with no Content-Type and a header of its own.
      part(
        'Content-Disposition: form-data; name="prompt"\r\nContent-Type: text/plain; charset=iso-8859-1',
        Buffer.from([0x63, 0x61, 0x66, 0xe9]),
      ),
      part(
        'Content-Disposition: form-data; name="file"; filename="a \\"b\\".wav"\r\nX-Extra: 1',
        Buffer.from([0, 1, 2, 255]),
      ),
      part('Content-Disposition: form-data; name="model"', last),
      Buffer.from(`--${boundary}--\r\n`),
    ]);

  test("only the `model` fields' values change (all of them, as FormData.set); every other byte is the client's", () => {
    // Found by an outside tester: encoding the form again turned Latin-1 into U+FFFD, gave a file
    // part with no Content-Type `text/plain`, and dropped part headers.
    expect(withFieldValue(form("q", "q"), contentType, "model", "Qwen/Qwen3-8B")).toEqual(
      form("Qwen/Qwen3-8B", "Qwen/Qwen3-8B"),
    );
  });

  test("a quoted boundary; no such field: undefined; the parser reads the new name", async () => {
    const quoted = `multipart/form-data; boundary="${boundary}"`;
    expect(withFieldValue(form("a", "q"), quoted, "model", "x")).toEqual(form("x", "x"));
    expect(withFieldValue(form("a", "q"), contentType, "language", "en")).toBeUndefined();
    const plain = Buffer.concat([
      part('Content-Disposition: form-data; name="model"', "q"),
      part('Content-Disposition: form-data; name="file"; filename="a.wav"', Buffer.from([0, 1])),
      Buffer.from(`--${boundary}--\r\n`),
    ]);
    const parsed = await parseForm(withFieldValue(plain, contentType, "model", "x")!, contentType);
    expect(parsed.getAll("model")).toEqual(["x"]);
  });
});
