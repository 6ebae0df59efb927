import { leadingRevision, type RevisionOrder } from "./model-precedence.ts";

/**
 * Which Model each alias reaches when several could: a model id first (an alias named like a
 * Model's id is that Model's), then the Model that precedes (`modelPrecedence`: the oldest). Models
 * whose own id another serves get none (no request reaches them). The revisions of one Knative
 * Configuration all list their template's aliases: only the leading one (`leadingRevision`: the
 * newest ready, where the Route sends latest traffic) claims them, as old as the Configuration's
 * oldest revision Model. Pure and order-free, so every activator, which routes by it, and the
 * autoscaler, which says it in the left-out Model's status, agree whatever order their watches saw
 * the Models in.
 */

export interface AliasClaimant {
  /** `namespace/name` of the Model. */
  key: string;
  id: string;
  aliases: readonly string[];
  /** `modelPrecedence` of the Model: the lowest serves first. */
  precedence: string;
  /** For the Model of a Knative revision: its place among its Configuration's revisions. */
  revision?: RevisionOrder;
}

/** An alias a Model lists and does not get, and the Model (`namespace/name`) that has it. */
export interface LeftOutAlias {
  alias: string;
  holder: string;
  /** Whether the holder has it as its model id (else as an alias of its own, being older). */
  asId: boolean;
  /**
   * The holder is the leading revision of the same Knative Configuration (`leadingRevision`: the
   * newest ready one), which has every alias of its revisions.
   */
  sameConfiguration?: true;
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
  revision?: RevisionOrder;
  config: { id: string; aliases: readonly string[] };
}): AliasClaimant => ({
  key: model.key,
  id: model.config.id,
  aliases: model.config.aliases,
  precedence: model.precedence,
  ...(model.revision ? { revision: model.revision } : {}),
});

export function assignAliases(claimants: readonly AliasClaimant[]): AliasAssignment {
  const byPrecedence = (a: { precedence: string; key: string }, b: { precedence: string; key: string }) =>
    a.precedence < b.precedence ? -1 : a.precedence > b.precedence ? 1 : a.key < b.key ? -1 : 1;
  const ordered = [...claimants].sort(byPrecedence);
  const idOwners = new Map<string, string>();
  for (const c of ordered) if (!idOwners.has(c.id)) idOwners.set(c.id, c.key);
  const leaders = revisionLeaders(ordered);
  const aliasOwners = new Map<string, string>();
  const kept = new Map<string, string[]>();
  const leftOut = new Map<string, LeftOutAlias[]>();
  const claiming = ordered
    .map((c) => ({ ...c, precedence: leaders.get(c.key)?.precedence ?? c.precedence }))
    .sort(byPrecedence);
  for (const c of claiming) {
    if (idOwners.get(c.id) !== c.key) continue; // its id is another's: it serves nothing
    const leader = leaders.get(c.key)?.leader;
    if (leader !== undefined && leader !== c.key) {
      // A revision the Route has moved on from (or not yet to): its aliases are the leader's.
      kept.set(c.key, []);
      const lost = c.aliases
        .filter((alias) => alias !== c.id)
        .map((alias): LeftOutAlias => ({ alias, holder: leader, asId: false, sameConfiguration: true }));
      if (lost.length > 0) leftOut.set(c.key, lost);
      continue;
    }
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

/**
 * For each revision Model, the leading revision of its Configuration and the precedence its
 * Configuration claims aliases with: its oldest revision Model's, so a rollout does not make a
 * Configuration younger than another Model listing the same alias.
 */
function revisionLeaders(
  ordered: readonly AliasClaimant[],
): Map<string, { leader: string; precedence: string }> {
  const families = new Map<string, (AliasClaimant & { revision: RevisionOrder })[]>();
  for (const c of ordered) {
    if (!c.revision) continue;
    const family = families.get(c.revision.configuration) ?? [];
    family.push(c as AliasClaimant & { revision: RevisionOrder });
    families.set(c.revision.configuration, family);
  }
  const leaders = new Map<string, { leader: string; precedence: string }>();
  for (const family of families.values()) {
    const leader = leadingRevision(family)!.key;
    // `ordered` is by precedence, so the family's first is its oldest.
    const precedence = family[0]!.precedence;
    for (const c of family) leaders.set(c.key, { leader, precedence });
  }
  return leaders;
}
