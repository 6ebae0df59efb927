import { readFileSync } from "node:fs";
import { isLoopbackHost } from "../activator/admin-guard.ts";
import { type Flag, type FlagValues, UsageError } from "../lib/cli-flags.ts";

/** The environment variable that carries the admin token, for servers and client commands alike. */
export const adminTokenEnv = "SNOOZE_ADMIN_TOKEN";

/**
 * `--admin-token-file`: a file, not the token itself, so the token shows neither in `ps` nor in
 * shell history. On Kubernetes it is a mounted Secret.
 */
export const adminTokenFlags: Record<"admin-token-file", Flag> = {
  "admin-token-file": {
    type: "string",
    description: `file holding the admin API's bearer token (default: $${adminTokenEnv})`,
    placeholder: "file",
  },
};

/** The admin token of `--admin-token-file` (it wins) or `$SNOOZE_ADMIN_TOKEN`; undefined when neither is set. */
export function adminTokenFrom(
  values: FlagValues,
  env: Record<string, string | undefined> = process.env,
): string | undefined {
  const file = values["admin-token-file"];
  if (typeof file === "string") {
    let text: string;
    try {
      text = readFileSync(file, "utf8");
    } catch (error) {
      throw new UsageError(`cannot read --admin-token-file ${file}: ${(error as Error).message}`);
    }
    const token = text.trim();
    if (!token) throw new UsageError(`--admin-token-file ${file} is empty`);
    if (/\s/.test(token))
      throw new UsageError(`--admin-token-file ${file}: the token may not contain whitespace`);
    return token;
  }
  const fromEnv = env[adminTokenEnv]?.trim();
  if (fromEnv === undefined || fromEnv === "") return undefined;
  if (/\s/.test(fromEnv)) throw new UsageError(`$${adminTokenEnv}: the token may not contain whitespace`);
  return fromEnv;
}

/**
 * The admin token a server listening on `host` uses. A bind that other machines can reach (anything
 * but loopback) needs one: without it anyone who can reach the port could stop every model.
 */
export function serverAdminToken(
  values: FlagValues,
  host: string,
  env: Record<string, string | undefined> = process.env,
): string | undefined {
  const token = adminTokenFrom(values, env);
  if (token === undefined && !isLoopbackHost(host))
    throw new UsageError(
      `--host ${host || '""'} is not a loopback address, so the admin API needs a token: pass --admin-token-file <file> or set $${adminTokenEnv} (e.g. to the output of \`openssl rand -hex 32\`), or listen on 127.0.0.1`,
    );
  return token;
}

/** Request headers that carry the admin token, when there is one. */
export function adminHeaders(token: string | undefined): Record<string, string> {
  return token === undefined ? {} : { authorization: `Bearer ${token}` };
}
