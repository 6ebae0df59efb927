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
  const boundary = boundaryOf(contentType);
  if (boundary) {
    const delimiter = Buffer.from(`--${boundary}`);
    let parts = -1; // the closing delimiter ends the last part
    for (let at = body.indexOf(delimiter); at !== -1; at = body.indexOf(delimiter, at + delimiter.length))
      if (++parts > maxFormParts)
        return Promise.reject(
          new Error(`more than ${maxFormParts} parts; an upload has a file and a few fields`),
        );
  }
  return new Response(body, { headers: { "content-type": contentType } }).formData();
}

/** The boundary a multipart Content-Type names, if it names one. */
function boundaryOf(contentType: string): string | undefined {
  const match = /;\s*boundary=(?:"([^"]+)"|([^\s;]+))/i.exec(contentType);
  return match ? (match[1] ?? match[2]) : undefined;
}

/**
 * The form's bytes with every text field `field` set to `value` (as `FormData.set` would: an engine
 * reading the first or the last gets it), every other byte as the client sent it. Encoding the form
 * again would change what it carries: a part's charset, a file part's missing Content-Type, other
 * part headers, a filename's escapes. Undefined when there is no such field. The form has been
 * parsed already (it is well formed).
 */
export function withFieldValue(
  body: Buffer,
  contentType: string,
  field: string,
  value: string,
): Buffer | undefined {
  const boundary = boundaryOf(contentType);
  if (!boundary) return undefined;
  const delimiter = Buffer.from(`\r\n--${boundary}`);
  const blank = Buffer.from("\r\n\r\n");
  const values: [number, number][] = [];
  // The first delimiter may open the body without the CRLF before it.
  let at = body.indexOf(delimiter.subarray(2));
  while (at !== -1) {
    const headersStart = body.indexOf("\r\n", at) + 2;
    const headersEnd = body.indexOf(blank, headersStart);
    const next = body.indexOf(delimiter, headersStart);
    if (headersStart < 2 || headersEnd === -1 || next === -1 || headersEnd > next) break;
    if (namesField(body.subarray(headersStart, headersEnd).toString("latin1"), field))
      values.push([headersEnd + blank.length, next]);
    at = next + 2;
  }
  if (values.length === 0) return undefined;
  const pieces: Buffer[] = [];
  let from = 0;
  for (const [start, end] of values) {
    pieces.push(body.subarray(from, start), Buffer.from(value));
    from = end;
  }
  pieces.push(body.subarray(from));
  return Buffer.concat(pieces);
}

/** Whether a part's headers make it the text field `field` (form-data, that name, no filename). */
function namesField(headers: string, field: string): boolean {
  const disposition = headers.split("\r\n").find((line) => /^content-disposition\s*:/i.test(line));
  if (!disposition || /;\s*filename\*?=/i.test(disposition)) return false;
  const name = /;\s*name=(?:"((?:[^"\\]|\\.)*)"|([^\s;]+))/i.exec(disposition);
  return (name?.[1] ?? name?.[2]) === field;
}
