/**
 * multipart/form-data bodies (OpenAI's audio uploads: `/v1/audio/transcriptions` names its model in
 * a `model` field, beside the file), read and written by the WHATWG form parser and encoder that
 * Node.js ships (undici's `Response.formData()` and `Request`), not by hand. Loaded on the first
 * such body only.
 */
// With no boundary too: parsing it then says so (\`invalid_form\`), rather than it being taken for
// a body that is not JSON.
const multipart = /^\s*multipart\/form-data\s*(;|$)/i;

export const isMultipartForm = (contentType: string | undefined): contentType is string =>
  contentType !== undefined && multipart.test(contentType);

/**
 * More parts than any OpenAI upload has (a file and a dozen fields). The parser runs on the event
 * loop: a 33 MB form of small fields held every request and stream for seconds.
 */
export const maxFormParts = 256;

/**
 * Parses a whole multipart/form-data body; rejects when it is not one (a bad boundary, a cut part)
 * or has more than `maxFormParts` parts (counted first, by the boundary, without parsing).
 */
export function parseForm(body: Buffer, contentType: string): Promise<FormData> {
  const boundary = /;\s*boundary=(?:"([^"]+)"|([^\s;]+))/i.exec(contentType);
  if (boundary) {
    const delimiter = Buffer.from(`--${boundary[1] ?? boundary[2]}`);
    let parts = -1; // the closing delimiter ends the last part
    for (let at = body.indexOf(delimiter); at !== -1; at = body.indexOf(delimiter, at + delimiter.length))
      if (++parts > maxFormParts)
        return Promise.reject(
          new Error(`more than ${maxFormParts} parts; an upload has a file and a few fields`),
        );
  }
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
