// The ceiling of what reuse can give any placement: a fleet where every card already holds
// every prompt the fleet has seen, free of charge. Not a card that exists.
//
// A placement policy changes a request's latency in two ways only: how much of its prompt the
// chosen card reuses, and how long the card's queue ahead of it is. Under this ceiling reuse no
// longer depends on placement (each request reuses the longest prefix it shares with any
// earlier prompt, on whichever card it lands, with no load time and no cells spent on keeping
// it), so what is left to a policy is balance. The best balancer's capacity on it is the most
// reuse can give any policy on the same workload, card and SLO, give or take what a finer
// balance adds: a target well above it is out of reach of placement, whatever the rule.
import type { TokenIds } from "../../src/common/tokens.js";
import { RadixTree } from "../../src/scheduler/radix/tree.js";

/** The one account the ceiling's tree keeps: every card reads the same one. */
const EVERY_CARD = "every-card";

/** Every prompt admitted so far on any card, as one unbounded prefix tree. */
export class EveryPromptCached {
  private readonly tree = new RadixTree({ now: () => 0 });

  /** The longest prefix of `tokens` that a prompt admitted before shares. */
  longestPrefix(tokens: TokenIds): number {
    return this.tree.heldLength(EVERY_CARD, tokens);
  }

  /** Every card holds `tokens` from now on. */
  add(tokens: TokenIds): void {
    this.tree.insert(EVERY_CARD, tokens);
  }
}

/** The balancers the ceiling is searched with (registry names): the plain rotation and the
 *  least loaded card. Reuse being equal everywhere, the better of the two is the bound. */
export const CEILING_BALANCERS = ["roundrobin", "least-load"] as const;
