import { execFileSync } from "node:child_process";
import { mkdtempSync, symlinkSync, writeFileSync } from "node:fs";
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

test("--admin-token-file that is not a small regular file is a usage error saying what it is, never a hang", () => {
  // Found by a probe: a named pipe blocked the command for good (deaf to SIGTERM), and /dev/zero or
  // /dev/urandom was read until memory ran out.
  const dir = mkdtempSync(join(tmpdir(), "snooze-token-"));
  const fifo = join(dir, "fifo");
  execFileSync("mkfifo", [fifo]);
  expect(() => adminTokenFrom({ "admin-token-file": fifo }, {})).toThrow(
    `cannot read --admin-token-file ${fifo}: it is a named pipe (FIFO), not a regular file`,
  );
  expect(() => adminTokenFrom({ "admin-token-file": "/dev/zero" }, {})).toThrow(
    "cannot read --admin-token-file /dev/zero: it is a device, not a regular file",
  );
  expect(() => adminTokenFrom({ "admin-token-file": dir }, {})).toThrow(
    `cannot read --admin-token-file ${dir}: it is a directory, not a regular file`,
  );
  const large = join(dir, "large");
  writeFileSync(large, "a".repeat(64 * 1024 + 1));
  expect(() => adminTokenFrom({ "admin-token-file": large }, {})).toThrow(
    `cannot read --admin-token-file ${large}: the file is 65537 bytes; it may be at most 65536 bytes`,
  );
  const link = join(dir, "link");
  writeFileSync(join(dir, "token"), "s3cr3t\n");
  symlinkSync(join(dir, "token"), link);
  expect(adminTokenFrom({ "admin-token-file": link }, {})).toBe("s3cr3t");
});
