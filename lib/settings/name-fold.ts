/**
 * The form in which two model ids or aliases count as one name. Routing by `Host` ignores case, and
 * a person cannot tell `café` written with one code point (NFC) from `café` written as `e` plus a
 * combining accent (NFD), nor `ｑｗｅｎ` (full-width) from `qwen`: names equal in Unicode NFKC
 * (which takes both the canonical and the compatibility equivalences) with case ignored would look
 * like one name, and one of the models would be reached by surprise or not at all. NFKC rather
 * than NFC: what it adds (ligatures, full-width and super-script forms) is just as confusable, and
 * nobody needs two models that differ only in it.
 */
export const foldedName = (name: string): string => name.normalize("NFKC").toLowerCase();

/** Why `name` is refused beside the look-alike name of another model, saying how they differ. */
export function lookAlikeMessage(name: string, other: { name: string; id: string }): string {
  if (name.toLowerCase() === other.name.toLowerCase())
    return `"${name}" and "${other.name}" (model "${other.id}") differ only in case; ids and aliases must differ in more than case, as routing by Host ignores case`;
  // They may look identical: spelled out, the reader sees which characters differ.
  return `${spelledOut(name)} and ${spelledOut(other.name)} (model ${spelledOut(other.id)}) differ only in Unicode form (they are one name in NFKC, with case ignored); ids and aliases must differ in more, or they look like one name: write both the same way (one model) or rename one`;
}

/**
 * Why slot `name` is refused beside the look-alike slot `other`. Two slots are two accelerators: a
 * name written twice in two forms would let the members of each be resident at once on what is
 * one GPU (a case-only difference too: on Kubernetes a Slot's name is lowercase only).
 */
export function slotLookAlikeMessage(name: string, other: string): string {
  return `slots ${spelledOut(name)} and ${spelledOut(other)} differ ${
    name.toLowerCase() === other.toLowerCase()
      ? "only in case"
      : "only in Unicode form (they are one name in NFKC, with case ignored)"
  }: slots are accelerators apart, and names this close would be taken for one; write one name (one slot) or rename one`;
}

/** Why a model's `slot` names no slot, when a defined one differs from it only in case or Unicode form. */
export function nearSlotMessage(slot: string, defined: string): string {
  return `slot ${spelledOut(slot)} is not defined under \`slots:\`, but ${spelledOut(defined)} is, which differs from it ${
    slot.toLowerCase() === defined.toLowerCase() ? "only in case" : "only in Unicode form (they look alike)"
  }: write the name as the slot is written`;
}

/** A name with every character outside printable ASCII escaped, so look-alikes show how they differ. */
export function spelledOut(name: string): string {
  return JSON.stringify(name).replace(
    /[^\x20-\x7e]/gu,
    (c) => `\\u{${c.codePointAt(0)!.toString(16).toUpperCase()}}`,
  );
}
