import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect, test } from "vitest";
import { adminTokenFrom } from "./admin-token.ts";

test("a token is visible ASCII, as an HTTP header carries it: anything else is a usage error naming it", () => {
  // Found by an outside tester: a control character or a byte that is not UTF-8 made every client
  // command say it "cannot reach" Snooze, and a server took "tökén", which curl then sent as UTF-8
  // bytes and Node's fetch as Latin-1: a 401 for one client, accepted for the other.
  const file = join(mkdtempSync(join(tmpdir(), "snooze-token-")), "token");
  for (const token of ["tökén", "a\x01b", "\ufffd", "токен"]) {
    writeFileSync(file, `${token}\n`);
    expect(() => adminTokenFrom({ "admin-token-file": file }, {})).toThrow(
      `--admin-token-file ${file}: the token may hold only visible ASCII characters (letters, digits and punctuation)`,
    );
    expect(() => adminTokenFrom({}, { SNOOZE_ADMIN_TOKEN: token })).toThrow(
      "$SNOOZE_ADMIN_TOKEN: the token may hold only visible ASCII characters",
    );
  }
  writeFileSync(file, "s3cr3t-~+/=._!#\n");
  expect(adminTokenFrom({ "admin-token-file": file }, {})).toBe("s3cr3t-~+/=._!#");
  expect(() => adminTokenFrom({}, { SNOOZE_ADMIN_TOKEN: "a b" })).toThrow(
    "the token may not contain whitespace",
  );
});
