/**
 * multipart/form-data bodies (OpenAI's audio uploads: `/v1/audio/transcriptions` names its model in
 * a `model` field, beside the file), read and written by the WHATWG form parser and encoder that
 * Node.js ships (undici's `Response.formData()` and `Request`), not by hand. Loaded on the first
 * such body only.
 */
const multipart = /^\s*multipart\/form-data\s*;/i;

export const isMultipartForm = (contentType: string | undefined): contentType is string =>
  contentType !== undefined && multipart.test(contentType);

/** Parses a whole multipart/form-data body; rejects when it is not one (a bad boundary, a cut part). */
export function parseForm(body: Buffer, contentType: string): Promise<FormData> {
  return new Response(body, { headers: { "content-type": contentType } }).formData();
}

/** The form encoded again with `field` set to `value`: its new body and Content-Type (a new boundary). */
export async function withField(
  form: FormData,
  field: string,
  value: string,
): Promise<{ body: Buffer; contentType: string }> {
  form.set(field, value);
  const encoded = new Request("http://form.invalid/", { method: "POST", body: form });
  return {
    body: Buffer.from(await encoded.arrayBuffer()),
    contentType: encoded.headers.get("content-type") ?? "multipart/form-data",
  };
}
