/**
 * Which Model each alias reaches when several could: a model id first (an alias named like a
 * Model's id is that Model's), then the Model that precedes (`modelPrecedence`: the oldest). Models
 * whose own id another serves get none (no request reaches them). Pure and order-free, so every
 * activator, which routes by it, and the autoscaler, which says it in the left-out Model's status,
 * agree whatever order their watches saw the Models in.
 */

export interface AliasClaimant {
  /** `namespace/name` of the Model. */
  key: string;
  id: string;
  aliases: readonly string[];
  /** `modelPrecedence` of the Model: the lowest serves first. */
  precedence: string;
}

/** An alias a Model lists and does not get, and the Model (`namespace/name`) that has it. */
export interface LeftOutAlias {
  alias: string;
  holder: string;
  /** Whether the holder has it as its model id (else as an alias of its own, being older). */
  asId: boolean;
}

export interface AliasAssignment {
  /** The aliases each Model that serves its id gets, in its own order. */
  kept: Map<string, string[]>;
  /** The aliases each such Model lists and does not get; absent when it gets them all. */
  leftOut: Map<string, LeftOutAlias[]>;
}

/** A parsed Model (model-config.ts) as a claimant. */
export const aliasClaimant = (model: {
  key: string;
  precedence: string;
  config: { id: string; aliases: readonly string[] };
}): AliasClaimant => ({
  key: model.key,
  id: model.config.id,
  aliases: model.config.aliases,
  precedence: model.precedence,
});

export function assignAliases(claimants: readonly AliasClaimant[]): AliasAssignment {
  const ordered = [...claimants].sort((a, b) =>
    a.precedence < b.precedence ? -1 : a.precedence > b.precedence ? 1 : a.key < b.key ? -1 : 1,
  );
  const idOwners = new Map<string, string>();
  for (const c of ordered) if (!idOwners.has(c.id)) idOwners.set(c.id, c.key);
  const aliasOwners = new Map<string, string>();
  const kept = new Map<string, string[]>();
  const leftOut = new Map<string, LeftOutAlias[]>();
  for (const c of ordered) {
    if (idOwners.get(c.id) !== c.key) continue; // its id is another's: it serves nothing
    const mine: string[] = [];
    const lost: LeftOutAlias[] = [];
    for (const alias of c.aliases) {
      const idHolder = idOwners.get(alias);
      if (idHolder === c.key) continue; // its own id: it reaches the Model anyway
      const holder = idHolder ?? aliasOwners.get(alias);
      if (holder === undefined || holder === c.key) {
        aliasOwners.set(alias, c.key);
        mine.push(alias);
      } else lost.push({ alias, holder, asId: idHolder !== undefined });
    }
    kept.set(c.key, mine);
    if (lost.length > 0) leftOut.set(c.key, lost);
  }
  return { kept, leftOut };
}
