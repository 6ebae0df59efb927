/**
 * The user name and password a URL holds (`https://user:key@host/`), percent-decoded as HTTP Basic
 * authentication sends them, or why they cannot be: a `%` that begins no escape of UTF-8 (a
 * password `p%ss` pasted as it is). The URL parser keeps such a `%` as it is; Go's, which Knative
 * uses, refuses the URL ("invalid URL escape").
 */
export function urlCredentials(url: URL): { user: string; password: string } | { problem: string } {
  const user = decoded(url.username);
  const password = decoded(url.password);
  if (user !== undefined && password !== undefined) return { user, password };
  const which = user === undefined ? "user name" : "password";
  return {
    problem: `its ${which} has a % that is no percent-escape of UTF-8 (%XX): write a % in it as %25`,
  };
}

function decoded(text: string): string | undefined {
  try {
    return decodeURIComponent(text);
  } catch {
    return undefined;
  }
}
