/**
 * A slot member's place in its slot's line, as the autoscaler keeps it and the activators tell
 * clients to keep it. The autoscaler counts a member's wait for its slot from its first request for
 * as long as requests keep coming (autoscaler/wait-streak.ts); a request that times out while
 * another member holds the slot is told to retry soon enough to keep that wait going.
 */

/**
 * A pause in a member's requests this long ends its wait. Longer than a retry after
 * `slotRetryAfterMs` and the activators' reports between them; short enough that demand that went
 * away and came back later waits anew.
 */
export const waitGapMs = 5_000;

/**
 * What a request held for a slot member, and refused at its `holdBudget` while another member holds
 * the slot (staying, or leaving in a swap), is told to wait before it retries. Its own start or
 * wake estimate (10 s before one is measured, a minute for a large model), or the leaving
 * resident's drain and sleep call timeouts (a minute or more), would make a client that obeys it
 * pause past `waitGapMs`, each retry then waiting anew: a holdBudget shorter than the slot's maxWait
 * never reached it, the member starved behind a busy resident; and a swap that gave it the slot
 * was over before the client came back, the slot handed back to the busy member meanwhile. The
 * retry comes within `waitGapMs` with room for the activators' one-second reports and the client's
 * own delay, and is held again for the model.
 */
export const slotRetryAfterMs = 2_000;
