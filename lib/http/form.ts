/**
 * multipart/form-data bodies (OpenAI's audio uploads: `/v1/audio/transcriptions` names its model in
 * a `model` field, beside the file). Read by walking the parts' delimiters, never decoded into a
 * form object: the proxy needs a field or two, and the engine gets the client's own bytes. The
 * walk takes what the engine's parser (python-multipart, under vLLM's Starlette) takes: a
 * preamble, quoted names with backslash escapes (Go's `mime/multipart` writes `filename="a\"b"`,
 * which undici's form parser refused).
 */
// With no boundary too: reading it then says so (`invalid_form`), rather than it being taken for
// a body that is not JSON.
const multipart = /^\s*multipart\/form-data\s*(;|$)/i;

export const isMultipartForm = (contentType: string | undefined): contentType is string =>
  contentType !== undefined && multipart.test(contentType);

/**
 * More parts than any OpenAI upload has (a file and a dozen fields). Counted before anything else
 * is read: a 33 MB form of small fields held every request and stream for seconds.
 */
export const maxFormParts = 256;

/** One part of a form: its field name, its filename if it is a file, where its content lies. */
export interface FormPart {
  name: string;
  filename?: string;
  /** The content's bytes: `body.subarray(start, end)`. */
  start: number;
  end: number;
}

/** A body that is not a well-formed multipart/form-data form; the message says what is wrong. */
export class FormError extends Error {}

/**
 * The parts of a multipart/form-data body, in order. Throws a FormError when the Content-Type names
 * no boundary, the body has more than `maxFormParts` parts, a part has no Content-Disposition
 * naming its field, or the body is cut short (no closing delimiter).
 */
export function readForm(body: Buffer, contentType: string): FormPart[] {
  const boundary = boundaryOf(contentType);
  if (!boundary) throw new FormError("the Content-Type names no boundary");
  const dash = Buffer.from(`--${boundary}`);
  let count = -1; // the closing delimiter ends the last part
  for (let at = body.indexOf(dash); at !== -1; at = body.indexOf(dash, at + dash.length))
    if (++count > maxFormParts)
      throw new FormError(`more than ${maxFormParts} parts; an upload has a file and a few fields`);
  const delimiter = Buffer.from(`\r\n--${boundary}`);
  // The first delimiter may open the body, or follow a preamble and its CRLF.
  let at = body.subarray(0, dash.length).equals(dash) ? 0 : body.indexOf(delimiter);
  if (at === -1) throw new FormError(`no part starts with the boundary "${boundary}"`);
  if (at > 0) at += 2;
  const parts: FormPart[] = [];
  for (;;) {
    const after = at + dash.length;
    if (body.subarray(after, after + 2).toString("latin1") === "--") return parts;
    const lineEnd = body.indexOf("\r\n", after);
    // Only transport padding (spaces, tabs) may follow a delimiter on its line.
    if (lineEnd === -1 || !/^[ \t]*$/.test(body.subarray(after, lineEnd).toString("latin1")))
      throw new FormError("a boundary line is cut short or has text after the boundary");
    const headersStart = lineEnd + 2;
    const blank = body.subarray(headersStart, headersStart + 2).toString("latin1") === "\r\n";
    const headersEnd = blank ? headersStart : body.indexOf("\r\n\r\n", headersStart);
    const next = body.indexOf(delimiter, headersStart);
    if (next === -1) throw new FormError("the form is cut short: it has no closing boundary");
    if (headersEnd === -1 || headersEnd > next)
      throw new FormError("a part's headers do not end with a blank line");
    const start = headersEnd + (blank ? 2 : 4);
    // UTF-8, as browsers and the engine's parser take a name or filename.
    const field = disposition(body.subarray(headersStart, headersEnd).toString("utf8"));
    if (!field) throw new FormError('a part has no `Content-Disposition: form-data; name="…"`');
    parts.push({ ...field, start, end: Math.max(start, next) });
    at = next + 2;
  }
}

/** The text field's value (UTF-8, as clients encode it), or undefined for a file. */
export const textOf = (body: Buffer, part: FormPart): string | undefined =>
  part.filename === undefined ? body.subarray(part.start, part.end).toString("utf8") : undefined;

/**
 * The form's bytes with every text field `field` set to `value` (as `FormData.set` would: an engine
 * reading the first or the last gets it), every other byte as the client sent it. Encoding the form
 * again would change what it carries: a part's charset, a file part's missing Content-Type, other
 * part headers, a filename's escapes. Undefined when there is no such field.
 */
export function withFieldValue(
  body: Buffer,
  parts: readonly FormPart[],
  field: string,
  value: string,
): Buffer | undefined {
  const values = parts.filter((p) => p.name === field && p.filename === undefined);
  if (values.length === 0) return undefined;
  const pieces: Buffer[] = [];
  let from = 0;
  for (const { start, end } of values) {
    pieces.push(body.subarray(from, start), Buffer.from(value));
    from = end;
  }
  pieces.push(body.subarray(from));
  return Buffer.concat(pieces);
}

/** The boundary a multipart Content-Type names, if it names one. */
function boundaryOf(contentType: string): string | undefined {
  const match = /;\s*boundary=(?:"([^"]+)"|([^\s;]+))/i.exec(contentType);
  return match ? (match[1] ?? match[2]) : undefined;
}

/** One `; key=value` parameter, the value a token or a quoted-string (backslash escapes undone). */
const parameter = /\s*;\s*([^\s=;]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;"]*))/y;

/** The field a part's headers name (`Content-Disposition: form-data; name=…[; filename=…]`). */
function disposition(headers: string): { name: string; filename?: string } | undefined {
  const line = headers.split("\r\n").find((l) => /^content-disposition\s*:/i.test(l));
  const type = line && /^content-disposition\s*:\s*form-data/i.exec(line);
  if (!type) return undefined;
  const params = new Map<string, string>();
  parameter.lastIndex = type[0].length;
  for (let m = parameter.exec(line); m; m = parameter.exec(line))
    params.set(m[1]!.toLowerCase(), m[3] ?? m[2]!.replace(/\\(.)/g, "$1"));
  const name = params.get("name");
  if (name === undefined) return undefined;
  // `filename*=` (RFC 5987) alone marks a file too.
  const filename = params.get("filename") ?? (params.has("filename*") ? "" : undefined);
  return { name, ...(filename !== undefined ? { filename } : {}) };
}
