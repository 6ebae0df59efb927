/**
 * Error bodies exactly as vLLM's OpenAI server writes them. vLLM's ErrorResponse
 * is `{"error": {"message", "type", "param", "code"}}` with the HTTP status as an
 * integer `code` (older releases used a flat `{"object": "error", ...}`). The
 * `type` depends on where vLLM catches the error:
 * - request schema (pydantic) errors: the status phrase, `Bad Request`;
 * - errors raised while serving (bad values, context too long): `BadRequestError`;
 * - unknown model: `NotFoundError` (404); unexpected failures: `InternalServerError` (500).
 * Unknown routes answer FastAPI's own `{"detail": "Not Found"}`.
 */
export interface VllmErrorBody {
  error: { message: string; type: string; param: string | null; code: number };
}

/** An error that becomes one vLLM-shaped HTTP answer. */
export class VllmHttpError extends Error {
  readonly status: number;
  readonly body: unknown;
  constructor(status: number, body: unknown, message?: string) {
    super(message ?? JSON.stringify(body));
    this.name = "VllmHttpError";
    this.status = status;
    this.body = body;
  }
}

export function errorBody(
  message: string,
  type: string,
  code: number,
  param: string | null = null,
): VllmErrorBody {
  return { error: { message, type, param, code } };
}

/** A value vLLM rejects while serving (its VLLMValidationError or ValueError): 400 BadRequestError. */
export function badRequest(message: string, param: string | null = null): VllmHttpError {
  return new VllmHttpError(400, errorBody(message, "BadRequestError", 400, param));
}

/**
 * vLLM's VLLMValidationError: its message ends with the parameter and the value refused, each
 * when known (a value of None is left out), and `param` names the parameter.
 */
export function invalidParameter(message: string, parameter: string, value?: unknown): VllmHttpError {
  const extras = [`parameter=${parameter}`];
  if (value !== undefined && value !== null) extras.push(`value=${pythonValue(value)}`);
  return badRequest(`${message} (${extras.join(", ")})`, parameter);
}

/** A model the engine does not serve: vLLM's check lists the names it does serve. */
export function modelNotFound(model: string, servedModelNames: readonly string[]): VllmHttpError {
  return new VllmHttpError(
    404,
    errorBody(
      `The model \`${model}\` does not exist. Valid aliases: ${servedModelNames.join(", ")}.`,
      "NotFoundError",
      404,
      "model",
    ),
  );
}

export function internalError(message: string): VllmHttpError {
  return new VllmHttpError(500, errorBody(message, "InternalServerError", 500));
}

/** FastAPI's HTTPException as vLLM renders it: the status phrase as `type`. */
export function httpException(status: number, detail: string): VllmHttpError {
  const phrase: Record<number, string> = {
    400: "Bad Request",
    404: "Not Found",
    500: "Internal Server Error",
  };
  return new VllmHttpError(status, errorBody(detail, phrase[status] ?? "Error", status));
}

export function notFoundRoute(): VllmHttpError {
  return new VllmHttpError(404, { detail: "Not Found" });
}

export function methodNotAllowed(): VllmHttpError {
  return new VllmHttpError(405, { detail: "Method Not Allowed" });
}

/** One pydantic validation failure; `loc` is the cleaned dotted path vLLM reports as `param`. */
export interface SchemaIssue {
  type: string;
  loc: string;
  msg: string;
  input: unknown;
  /** A constraint's context as Python prints it (`{'le': 2}`), when pydantic gives one. */
  ctx?: string;
}

/**
 * A request-schema failure, formatted like vLLM's validation handler: a count,
 * then one Python-dict-like line per error, with containers summarized.
 */
export function schemaError(issues: readonly SchemaIssue[]): VllmHttpError {
  const count = issues.length;
  const label = count === 1 ? "error" : "errors";
  const lines = issues.map(
    (issue) =>
      `  {'type': '${issue.type}', 'loc': '${issue.loc}', 'msg': ${pythonRepr(issue.msg)}, 'input': ${pythonInput(issue.input)}${issue.ctx ? `, 'ctx': ${issue.ctx}` : ""}}`,
  );
  const message = `${count} validation ${label}:\n${lines.join("\n")}`;
  return new VllmHttpError(400, errorBody(message, "Bad Request", 400, issues[0]?.loc ?? null));
}

/** A string as Python's `repr` writes it: single quotes, double ones when it holds a single quote. */
export function pythonRepr(text: string): string {
  if (text.includes("'") && !text.includes('"')) return `"${text}"`;
  return `'${text.replaceAll("\\", "\\\\").replaceAll("'", "\\'")}'`;
}

function pythonInput(value: unknown): string {
  if (Array.isArray(value)) return `'<list of ${value.length} items>'`;
  if (value && typeof value === "object") return `'<dict of ${Object.keys(value).length} items>'`;
  return pythonValue(value, true);
}

function pythonValue(value: unknown, quoteStrings = false): string {
  if (value === null || value === undefined) return "None";
  if (value === true) return "True";
  if (value === false) return "False";
  if (typeof value === "number" && !Number.isFinite(value))
    return Number.isNaN(value) ? "nan" : value > 0 ? "inf" : "-inf";
  // vLLM's validation handler cuts a long input at 200 characters and says so.
  if (typeof value === "string")
    return quoteStrings
      ? pythonRepr(value.length > 200 ? `${value.slice(0, 200)}...[truncated]` : value)
      : value;
  return String(value);
}
