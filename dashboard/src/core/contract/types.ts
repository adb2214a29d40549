// Written by scripts/contract.mjs from the engine's answers (tests/golden/status/
// and fixtures/): do not edit. `npm run contract` writes it again.

/** The version of the answers' JSON this package reads. */
export const CONTRACT = 1 as const

/** A time as the server wrote it (a PostgreSQL timestamptz). */
export type Timestamp = string

/** The states a replica is in: every key of the overview's counts. */
export type ReplicaState = Extract<keyof StateCounts, string>

export type Remedy = "fix" | "wait"

export type RowState = "holds" | "leaving" | "missing" | "on_its_way" | "outdated" | "set_aside"

export type WishState = "applied" | "pending" | "refused" | "waiting"

export interface Explain {
  because: Because[]
  contract: number
  held: Held | null
  kept_away: KeptAway[]
  key: string
  now: Timestamp
  replica: string
  should: boolean
  state: RowState | null
  table: string
}

export type Because =
  | {
    key: string
    reason: "follows"
    table: string
  }
  | {
    key: string
    reason: "parent_of"
    table: string
  }
  | {
    reason: "rule"
    rule: string
  }

export interface Held {
  confirmed: boolean
  leaving: unknown
  newest_note: number | null
  note: number
  refused: string | null
  refused_at: Timestamp | null
  retry_at: Timestamp | null
  sent: number
}

export type KeptAway =
  | {
    belongs_to: {
      live: boolean
      replica: string
    } | null
    columns: string[]
    follows: string | null
    groups: number
    reason: "no_rule"
    rule: string
    values: string[]
  }
  | {
    reason: "no_such_row"
  }
  | {
    reason: "not_live"
  }
  | {
    reason: "other_partition"
    replica_partition: string
    row_partition: string
  }
  | {
    reason: "outside_active_view"
    view: string
  }
  | {
    at: Timestamp
    reason: "refused"
    retry_at: Timestamp
    why: string
  }
  | {
    key: string
    reason: "set_aside"
    retry_at: Timestamp
    since: Timestamp
    table: string
    why: string
  }
  | {
    reason: "snapshot_on_its_way"
  }
  | {
    reason: "unknown_replica"
  }

export interface Health {
  contract: number
  drift: {
    first: {
      fix: string
      found_at: Timestamp
      problem: string
      remedy: Remedy
      tables: string[]
    }[]
    total: number
  }
  failing: {
    first: FailingReplica[]
    total: number
  }
  healthy: boolean
  inbox: {
    first: KeptUpload[]
    total: number
  }
  notes: Notes
  now: Timestamp
  refused: {
    first: RefusedRow[]
    total: number
  }
  set_aside: {
    first: SetAsideRow[]
    total: number
  }
  stalled: {
    first: StalledReplica[]
    total: number
  }
}

export interface FailingReplica {
  failed_at: Timestamp
  failures: number
  last_error: string
  message: string
  refusals: number
  remedy: Remedy
  replica: string
  retry_at: Timestamp
}

export interface KeptUpload {
  kept_at: Timestamp
  key: string
  op: string
  reason: string
  remedy: Remedy
  replica: string
  retry_at: Timestamp
  table: string
  tries: number
  waiting: boolean
}

export interface Notes {
  oldest_age_seconds: number | null
  oldest_at: Timestamp | null
  pending: number
  remedy: Remedy
}

export interface StalledReplica {
  healed_at: Timestamp | null
  heals: number
  heard_at: Timestamp
  messages: number
  remedy: Remedy
  replica: string
  since: Timestamp
}

export interface Listing {
  contract: number
  lim: number
  now: Timestamp
  offset: number
  replicas: Replica[]
  state: ReplicaState | null
  total: number
}

export interface Replica {
  applied_at: Timestamp
  backlog: Backlog
  heard_at: Timestamp
  id: string
  owed: number
  partition: unknown
  state: ReplicaState
  why: Why
  wishes: WishCounts
}

export interface Backlog {
  said_at: Timestamp
  tables: BacklogTable[]
}

export interface Why {
  backlog: boolean
  drift: boolean
  failed_at: Timestamp | null
  failures: number
  held_back: number
  kept: number
  last_error: string | null
  messages_waiting: number
  pending: number
  provisioning: boolean
  refused: number
  set_aside: number
  stalled_since: Timestamp | null
  unconfirmed: boolean
  waiting: number
}

export interface WishCounts {
  applied: number
  pending: number
  refused: number
  superseded: number
  waiting: number
}

export interface Overview {
  contract: number
  health: OverviewHealth
  healthy: boolean
  now: Timestamp
  replicas: WorstReplicas
  states: StateCounts
  tables: TableFigures[]
}

export interface OverviewHealth {
  drift: {
    first: {
      fix: string
      found_at: Timestamp
      problem: string
      remedy: Remedy
      tables: string[]
    }[]
    total: number
  }
  failing: {
    first: FailingReplica[]
    total: number
  }
  healthy: boolean
  inbox: {
    first: KeptUpload[]
    total: number
  }
  notes: Notes
  refused: {
    first: RefusedRow[]
    total: number
  }
  set_aside: {
    first: SetAsideRow[]
    total: number
  }
  stalled: {
    first: StalledReplica[]
    total: number
  }
}

export interface WorstReplicas {
  first: Replica[]
  total: number
}

export interface StateCounts {
  awaiting_fix: number
  catching_up: number
  stalled: number
  synced: number
  unreachable: number
}

export interface TableFigures {
  in_flight: number
  pending: number
  set_aside: number
  synced: boolean
  table: string
  unfiled: number
}

export interface Progress {
  contract: number
  now: Timestamp
  replicas: ReplicaProgress[]
}

export interface ReplicaProgress {
  partition: string | null
  replica: string
  snapshot_on_its_way: boolean
  tables: TableProgress[]
}

export interface TableProgress {
  holds: number
  in_flight: number
  missing: number
  outdated: number
  set_aside: number
  should: number
  table: string
  to_remove: number
}

export interface RowProgress {
  contract: number
  key: string
  now: Timestamp
  places: Place[]
  table: string
  unconcerned: number
}

export interface Place {
  confirmed: boolean
  leaving: unknown
  newest_note: number | null
  note: number | null
  refused: string | null
  replica: string
  sent: number | null
  state: RowState
}

export interface RefusedRow {
  held_back: boolean
  key: string
  message: string
  reason: string
  refused_at: Timestamp
  remedy: Remedy
  replica: string
  retry_at: Timestamp
  table: string
}

export interface SetAsideRow {
  key: string
  reason: string
  remedy: Remedy
  retry_at: Timestamp
  since: Timestamp
  table: string
}

export interface BacklogTable {
  set_aside: number
  table: string
  unfiled: number
  unsent: number
}

export interface WishListing {
  contract: number
  lim: number
  now: Timestamp
  offset: number
  state: WishState | null
  total: number
  wishes: Wish[]
}

export interface Wish {
  answered: string | null
  answered_at: Timestamp | null
  based_on: unknown
  id: string
  key: string
  note: string
  outcome: string | null
  reason: string | null
  replica: string
  reported: Record<string, unknown>
  state: WishState
  table: string
  version: string
  wanted: Record<string, unknown>
  wished_at: Timestamp
}
