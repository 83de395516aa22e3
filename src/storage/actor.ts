/** Who made a change, as the event log records it (storage/events.ts). */

/** The key whose request made a change: its account and its id (never the key itself). */
export interface Actor {
  account: string;
  keyId: string;
}
