/** What admission knows about a request besides its arrival: computed once from its headers. */
export interface RequestTraits {
  /** Its priority class (`queue.classes`), already checked to be a configured one. */
  priority: string;
  /** The client's API key (`Authorization: Bearer ...`), or null; requests of one key form one flow. */
  apiKey: string | null;
}
