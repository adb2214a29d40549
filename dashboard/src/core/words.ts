// Every word the dashboard says, in each language it speaks. Each is a
// whole sentence or a label: counts go through plural() so they take the
// language's plural forms, and ages through ago().
import type { Remedy, RowState, WishState } from './contract/types'
import { ago, plural, span } from './plural'

/** The states the package has words for: every state the engine answers (the type check holds it). */
export type KnownState = 'awaiting_fix' | 'unreachable' | 'stalled' | 'catching_up' | 'synced'

/** The banner's colour, named for what it means. */
export type Tone = 'ok' | 'busy' | 'fix'

export type Locale = 'en' | 'es'

export interface Words {
  locale: Locale
  // The banner.
  tone: Record<Tone, string>
  allInSync(total: number): string
  noReplica(): string
  waitForFix(replicas: number, total: number): string
  problemsWaitForFix(problems: number): string
  onTheirWay(replicas: number, total: number): string
  outOfReach(replicas: number): string
  notMoving(replicas: number): string
  drifted(differences: number): string
  // A replica's state, and what is behind it.
  state: Record<KnownState, string>
  unknownState(state: string): string
  notAnswering(age: string | null): string
  neverHeard(): string
  heard(age: string): string
  holdsWhatItShould(): string
  pending(n: number): string
  owed(n: number): string
  unconfirmed(): string
  provisioning(): string
  backlog(unsent: number, unfiled: number, setAside: number, age: string | null): string
  setAsideOnServer(n: number): string
  heldBack(n: number): string
  waitingUploads(n: number): string
  failures(n: number, age: string | null, error: string | null): string
  refusedRows(n: number): string
  keptUploads(n: number): string
  awaitsDrift(): string
  stalledSince(messages: number, age: string | null): string
  wishCounts(kind: 'pending' | 'waiting' | 'refused' | 'superseded', n: number): string
  // The list of replicas.
  all(): string
  showing(from: number, to: number, total: number): string
  worstOf(shown: number, total: number): string
  noneInState(): string
  previous(): string
  next(): string
  replicas(): string
  pickState(): string
  // The tables.
  tables(): string
  tableColumns: { table: string; pending: string; inFlight: string; setAside: string; unfiled: string }
  tableInSync(): string
  tableWaits(pending: number, inFlight: number, setAside: number, unfiled: number): string
  // The problems.
  problems(): string
  noProblem(): string
  remedy: Record<Remedy, string>
  notesWaiting(n: number, age: string | null): string
  differs(problem: string, age: string | null): string
  runStatement(statements: number): string
  noStatement(): string
  statementLabel(): string
  copy(): string
  copied(): string
  copyFailed(): string
  rowSetAside(table: string, key: string, reason: string): string
  rowRefused(replica: string, table: string, key: string, reason: string, heldBack: boolean): string
  uploadKept(replica: string, table: string, key: string, reason: string, waiting: boolean): string
  sendsFail(replica: string, failures: number, error: string): string
  stalledReplica(replica: string, messages: number, age: string | null, heals: number): string
  more(n: number): string
  // One replica's progress.
  progressOf(name: string): string
  holdsOf(held: number, should: number): string
  progressColumns: { table: string; holds: string; inFlight: string; setAside: string; toRemove: string }
  snapshotOnItsWay(): string
  noProgress(): string
  // Where one row is.
  placesOf(table: string, key: string): string
  place: Record<RowState, string>
  placeRefused(reason: string): string
  unconcerned(n: number): string
  why(): string
  // Why a row is or is not on a replica (sync.explain).
  explainState(name: string, state: RowState | null, should: boolean): string
  becauseRule(rule: string): string
  becauseFollows(table: string, key: string): string
  becauseParentOf(table: string, key: string): string
  keptNoRule(rule: string): string
  noRuleAssigned(read: string, name: string, live: boolean): string
  noRuleAssignedToNone(read: string): string
  noRuleFollows(table: string, read: string): string
  noRuleGrouped(groups: number): string
  noRuleNone(): string
  keptNoSuchRow(): string
  keptNotLive(): string
  keptOtherPartition(row: string, replica: string): string
  keptOutsideView(view: string): string
  keptRefused(why: string): string
  keptSetAside(table: string, key: string, why: string): string
  keptSnapshot(): string
  keptUnknownReplica(): string
  keptOther(reason: string): string
  // Wishes.
  wishes(): string
  noWish(): string
  wishState: Record<WishState | 'superseded', string>
  wishOf(name: string, table: string, wanted: string): string
  wishReason(reason: string): string
  wishNote(note: string): string
  // Refusals and failures.
  contractRefused(got: unknown, reads: number): string
  notAnAnswer(): string
  readFailed(error: string): string
  ago(ms: number): string
  /** A span of time ("5 minutes"), for how long something has lasted. */
  span(ms: number): string
}

const en: Words = {
  locale: 'en',
  tone: { ok: 'In sync', busy: 'On its way', fix: 'Needs a fix' },
  allInSync: (total) =>
    plural('en', total, {
      one: 'Everything is in sync: the replica holds what it should.',
      other: 'Everything is in sync: all {n} replicas hold what they should.',
    }),
  noReplica: () => 'No replica is live yet.',
  waitForFix: (n, total) =>
    plural('en', n, {
      one: `1 replica of ${total} waits for a fix to be deployed.`,
      other: `{n} replicas of ${total} wait for a fix to be deployed.`,
    }),
  problemsWaitForFix: (n) =>
    plural('en', n, {
      one: '1 problem waits for a fix to be deployed.',
      other: '{n} problems wait for a fix to be deployed.',
    }),
  onTheirWay: (n, total) =>
    plural('en', n, {
      one: `Changes are on their way to 1 replica of ${total}.`,
      other: `Changes are on their way to {n} replicas of ${total}.`,
    }),
  outOfReach: (n) =>
    plural('en', n, {
      one: '1 replica is out of reach; the network will settle it.',
      other: '{n} replicas are out of reach; the network will settle them.',
    }),
  notMoving: (n) =>
    plural('en', n, {
      one: '1 replica is not moving: it is heard from but applies nothing.',
      other: '{n} replicas are not moving: they are heard from but apply nothing.',
    }),
  drifted: (n) =>
    plural('en', n, {
      one: '1 difference between the database and its declarations waits for its statement to be run.',
      other: '{n} differences between the database and its declarations wait for their statements to be run.',
    }),
  state: {
    awaiting_fix: 'Waiting for a fix',
    unreachable: 'Out of reach',
    stalled: 'Not moving',
    catching_up: 'Catching up',
    synced: 'In sync',
  },
  unknownState: (s) => `In a state this dashboard does not know (${s})`,
  notAnswering: (age) => (age ? `Not answering: last heard ${age}.` : 'Not answering.'),
  neverHeard: () => 'Never heard from yet.',
  heard: (age) => `Last heard ${age}.`,
  holdsWhatItShould: () => 'Holds what it should; everything it wrote is filed.',
  pending: (n) => plural('en', n, { one: '1 change on its way.', other: '{n} changes on their way.' }),
  owed: (n) =>
    plural('en', n, { one: '1 message waits for it to take it.', other: '{n} messages wait for it to take them.' }),
  unconfirmed: () => 'It has not yet said it applied the last message sent.',
  provisioning: () => 'Everything it should hold is being sent to it again.',
  backlog: (unsent, unfiled, setAside, age) =>
    `${plural('en', unsent, { one: '1 row it wrote is not sent', other: '{n} rows it wrote are not sent' })}, ` +
    `${plural('en', unfiled, { one: '1 not filed', other: '{n} not filed' })}` +
    (setAside > 0 ? `, ${plural('en', setAside, { one: '1 set aside', other: '{n} set aside' })}` : '') +
    (age ? `, as it said ${age}.` : '.'),
  setAsideOnServer: (n) =>
    plural('en', n, { one: '1 row is set aside on the server.', other: '{n} rows are set aside on the server.' }),
  heldBack: (n) =>
    plural('en', n, {
      one: '1 row it held back comes back to it.',
      other: '{n} rows it held back come back to it.',
    }),
  waitingUploads: (n) =>
    plural('en', n, {
      one: '1 upload waits for its provisioning to be confirmed.',
      other: '{n} uploads wait for its provisioning to be confirmed.',
    }),
  failures: (n, age, error) =>
    plural('en', n, { one: '1 send failed', other: '{n} sends failed in a row' }) +
    (age ? `, the last ${age}` : '') +
    (error ? `: ${error}.` : '.'),
  refusedRows: (n) => plural('en', n, { one: '1 row it refused is set aside.', other: '{n} rows it refused are set aside.' }),
  keptUploads: (n) =>
    plural('en', n, { one: '1 upload of its is kept in the inbox.', other: '{n} uploads of its are kept in the inbox.' }),
  awaitsDrift: () =>
    'It waits for the database to match its declarations again: run the statement shown under what the engine waits on.',
  stalledSince: (messages, age) =>
    plural('en', messages, {
      one: '1 message waits for it, and it has applied nothing',
      other: '{n} messages wait for it, and it has applied nothing',
    }) + (age ? ` for ${age}.` : '.'),
  wishCounts: (kind, n) =>
    ({
      pending: plural('en', n, { one: '1 wish not answered yet.', other: '{n} wishes not answered yet.' }),
      waiting: plural('en', n, { one: '1 wish waits on the replica.', other: '{n} wishes wait on the replica.' }),
      refused: plural('en', n, { one: '1 wish refused.', other: '{n} wishes refused.' }),
      superseded: plural('en', n, {
        one: '1 wish found changed there first.',
        other: '{n} wishes found changed there first.',
      }),
    })[kind],
  all: () => 'All',
  showing: (from, to, total) =>
    plural('en', total, { one: 'Showing the only replica.', other: `Showing ${from}–${to} of {n}.` }),
  worstOf: (shown, total) =>
    plural('en', total, {
      one: 'The only replica.',
      other: `The ${shown} that need attention most, of {n} in all.`,
    }),
  noneInState: () => 'No replica is in this state.',
  previous: () => 'Previous page',
  next: () => 'Next page',
  replicas: () => 'Replicas',
  pickState: () => 'Show the replicas in one state',
  tables: () => 'Tables',
  tableColumns: { table: 'Table', pending: 'Pending', inFlight: 'In flight', setAside: 'Set aside', unfiled: 'Not filed' },
  tableInSync: () => 'In sync.',
  tableWaits: (p, f, s, u) =>
    `${plural('en', p, { one: '1 change pending', other: '{n} changes pending' })}, ` +
    `${plural('en', f, { one: '1 row in flight', other: '{n} rows in flight' })}, ` +
    `${plural('en', s, { one: '1 set aside', other: '{n} set aside' })}, ` +
    `${plural('en', u, { one: '1 not filed', other: '{n} not filed' })}.`,
  problems: () => 'What the engine waits on',
  noProblem: () => 'Nothing waits: no problem to show.',
  remedy: {
    wait: 'Waits for the network or the engine: it settles by itself.',
    fix: 'Waits for a fix to be deployed; then the engine tries again. Nothing to edit by hand.',
  },
  notesWaiting: (n, age) =>
    plural('en', n, { one: '1 change is not planned yet', other: '{n} changes are not planned yet' }) +
    (age ? `; the oldest was noted ${age}.` : '.'),
  differs: (problem, age) => `${problem}${age ? ` (found ${age})` : ''}.`,
  runStatement: (n) =>
    plural('en', n, {
      one: 'Run this statement; the engine then goes on by itself.',
      other: 'Run these {n} statements; the engine then goes on by itself.',
    }),
  noStatement: () => 'The engine gives no statement to run: do as it says.',
  statementLabel: () => 'The statement to run',
  copy: () => 'Copy the statement',
  copied: () => 'Copied.',
  copyFailed: () => 'Could not copy: select the statement and copy it.',
  rowSetAside: (table, key, reason) => `A row of ${table} (${key}) is set aside on the server: ${reason}.`,
  rowRefused: (replica, table, key, reason, heldBack) =>
    heldBack
      ? `${replica} held back a row of ${table} (${key}); it comes back to it.`
      : `${replica} refused a row of ${table} (${key}): ${reason}.`,
  uploadKept: (replica, table, key, reason, waiting) =>
    waiting
      ? `An upload from ${replica} to ${table} (${key}) waits for its provisioning to be confirmed.`
      : `An upload from ${replica} to ${table} (${key}) is kept in the inbox: ${reason}.`,
  sendsFail: (replica, failures, error) =>
    plural('en', failures, {
      one: `A send to ${replica} failed: ${error}.`,
      other: `Sends to ${replica} failed {n} times in a row: ${error}.`,
    }),
  stalledReplica: (replica, messages, age, heals) =>
    plural('en', messages, {
      one: `${replica} is heard from but has applied nothing${age ? ` for ${age}` : ''} while 1 message waits for it`,
      other: `${replica} is heard from but has applied nothing${age ? ` for ${age}` : ''} while {n} messages wait for it`,
    }) +
    (heals > 0
      ? plural('en', heals, { one: '; the engine tried once to heal it.', other: '; the engine tried {n} times to heal it.' })
      : '.'),
  more: (n) => plural('en', n, { one: 'And 1 more.', other: 'And {n} more.' }),
  progressOf: (name) => `Where ${name} stands, table by table`,
  holdsOf: (held, should) => plural('en', should, { one: `holds ${held} of 1`, other: `holds ${held} of {n}` }),
  progressColumns: { table: 'Table', holds: 'Holds', inFlight: 'On their way', setAside: 'Set aside', toRemove: 'To let go' },
  snapshotOnItsWay: () => 'Everything it should hold is on its way to it again.',
  noProgress: () => 'The relay has not seen this replica yet.',
  placesOf: (table, key) => `Where ${table} ${key} is`,
  place: {
    holds: 'Holds it.',
    outdated: 'Holds an older version.',
    on_its_way: 'Has it on its way.',
    missing: 'Lacks it.',
    leaving: 'Is letting it go.',
    set_aside: 'Has it set aside.',
  },
  placeRefused: (reason) => `Refused it: ${reason}.`,
  unconcerned: (n) =>
    plural('en', n, { one: '1 other replica should not hold it.', other: '{n} other replicas should not hold it.' }),
  why: () => 'Why?',
  explainState: (name, state, should) => {
    const is = state === null ? 'does not hold it' : en.place[state].replace(/\.$/, '').toLowerCase()
    return `${name} ${is}, and ${should ? 'should hold it' : 'should not hold it'}.`
  },
  becauseRule: (rule) => `Its rule (${rule}) sends it there.`,
  becauseFollows: (table, key) => `It follows ${table} ${key}, which goes there.`,
  becauseParentOf: (table, key) => `${table} ${key}, which goes there, points at it.`,
  keptNoRule: (rule) => `Its rule (${rule}) does not send it there.`,
  noRuleAssigned: (read, name, live) =>
    `Its rule (assigned) sends it to ${name} alone (${read})${live ? '' : `, and ${name} is not live`}.`,
  noRuleAssignedToNone: (read) =>
    `Its rule (assigned) sends it to the replica ${read} names, and the engine knows no such replica.`,
  noRuleFollows: (table, read) => `It follows ${table} (${read}), which this replica should not hold.`,
  noRuleGrouped: (n) =>
    n === 0
      ? 'Its rule (grouped) sends it to the replicas of its groups, and it is a member of none.'
      : plural('en', n, {
          one: 'Its rule (grouped) sends it to the replicas of its groups: it is a member of 1, not given to this replica.',
          other: 'Its rule (grouped) sends it to the replicas of its groups: it is a member of {n}, none given to this replica.',
        }),
  noRuleNone: () =>
    'Its table has no rule of its own (none): it goes only where a row held there points at it, and none does.',
  keptNoSuchRow: () => 'There is no such row.',
  keptNotLive: () => 'The replica is not live.',
  keptOtherPartition: (row, replica) => `The row is of partition ${row}, the replica of ${replica}.`,
  keptOutsideView: (view) => `The row is outside the active view ${view}.`,
  keptRefused: (why) => `The replica refused it: ${why}.`,
  keptSetAside: (table, key, why) => `${table} ${key} is set aside: ${why}.`,
  keptSnapshot: () => 'Everything is on its way to the replica again.',
  keptUnknownReplica: () => 'The engine does not know this replica.',
  keptOther: (reason) => `Kept away (${reason}).`,
  wishes: () => 'Wishes',
  noWish: () => 'No wish to show.',
  wishState: {
    refused: 'Refused',
    waiting: 'Waiting on the replica',
    pending: 'On its way',
    superseded: 'Superseded: the replica changed it first',
    applied: 'Applied',
  },
  wishOf: (name, table, wanted) => `${name}, ${table}: ${wanted}`,
  wishReason: (reason) => `The replica says: ${reason}.`,
  wishNote: (note) => `Note: ${note}.`,
  contractRefused: (got, reads) =>
    `This answer is of contract ${String(got)}, and this dashboard reads contract ${reads}: ` +
    'it is not drawn. Upgrade the engine and the dashboard together.',
  notAnAnswer: () => 'This is not an answer of the engine: it is not drawn.',
  readFailed: (error) => `The last read failed (${error}); what is shown is the last answer.`,
  ago: (ms) => ago('en', ms),
  span: (ms) => span('en', ms),
}

const es: Words = {
  locale: 'es',
  tone: { ok: 'Sincronizado', busy: 'En camino', fix: 'Necesita un arreglo' },
  allInSync: (total) =>
    plural('es', total, {
      one: 'Todo está sincronizado: la réplica tiene lo que debe.',
      other: 'Todo está sincronizado: las {n} réplicas tienen lo que deben.',
    }),
  noReplica: () => 'Todavía no hay ninguna réplica activa.',
  waitForFix: (n, total) =>
    plural('es', n, {
      one: `1 réplica de ${total} espera que se despliegue un arreglo.`,
      other: `{n} réplicas de ${total} esperan que se despliegue un arreglo.`,
    }),
  problemsWaitForFix: (n) =>
    plural('es', n, {
      one: '1 problema espera que se despliegue un arreglo.',
      other: '{n} problemas esperan que se despliegue un arreglo.',
    }),
  onTheirWay: (n, total) =>
    plural('es', n, {
      one: `Hay cambios en camino a 1 réplica de ${total}.`,
      other: `Hay cambios en camino a {n} réplicas de ${total}.`,
    }),
  outOfReach: (n) =>
    plural('es', n, {
      one: '1 réplica está fuera de alcance; la red lo resolverá.',
      other: '{n} réplicas están fuera de alcance; la red lo resolverá.',
    }),
  notMoving: (n) =>
    plural('es', n, {
      one: '1 réplica no avanza: se la oye, pero no aplica nada.',
      other: '{n} réplicas no avanzan: se las oye, pero no aplican nada.',
    }),
  drifted: (n) =>
    plural('es', n, {
      one: '1 diferencia entre la base de datos y sus declaraciones espera que se ejecute su sentencia.',
      other: '{n} diferencias entre la base de datos y sus declaraciones esperan que se ejecuten sus sentencias.',
    }),
  state: {
    awaiting_fix: 'Espera un arreglo',
    unreachable: 'Fuera de alcance',
    stalled: 'No avanza',
    catching_up: 'Poniéndose al día',
    synced: 'Sincronizada',
  },
  unknownState: (s) => `En un estado que este panel no conoce (${s})`,
  notAnswering: (age) => (age ? `No responde: se la oyó por última vez ${age}.` : 'No responde.'),
  neverHeard: () => 'Todavía no se la ha oído.',
  heard: (age) => `Se la oyó por última vez ${age}.`,
  holdsWhatItShould: () => 'Tiene lo que debe; todo lo que escribió está archivado.',
  pending: (n) => plural('es', n, { one: '1 cambio en camino.', other: '{n} cambios en camino.' }),
  owed: (n) =>
    plural('es', n, { one: '1 mensaje espera que lo tome.', other: '{n} mensajes esperan que los tome.' }),
  unconfirmed: () => 'Todavía no ha dicho que aplicó el último mensaje enviado.',
  provisioning: () => 'Se le vuelve a enviar todo lo que debe tener.',
  backlog: (unsent, unfiled, setAside, age) =>
    `${plural('es', unsent, { one: '1 fila que escribió no está enviada', other: '{n} filas que escribió no están enviadas' })}, ` +
    `${plural('es', unfiled, { one: '1 sin archivar', other: '{n} sin archivar' })}` +
    (setAside > 0 ? `, ${plural('es', setAside, { one: '1 apartada', other: '{n} apartadas' })}` : '') +
    (age ? `, según dijo ${age}.` : '.'),
  setAsideOnServer: (n) =>
    plural('es', n, { one: '1 fila está apartada en el servidor.', other: '{n} filas están apartadas en el servidor.' }),
  heldBack: (n) =>
    plural('es', n, { one: '1 fila que retuvo le vuelve.', other: '{n} filas que retuvo le vuelven.' }),
  waitingUploads: (n) =>
    plural('es', n, {
      one: '1 subida espera que se confirme su aprovisionamiento.',
      other: '{n} subidas esperan que se confirme su aprovisionamiento.',
    }),
  failures: (n, age, error) =>
    plural('es', n, { one: '1 envío falló', other: '{n} envíos fallaron seguidos' }) +
    (age ? `, el último ${age}` : '') +
    (error ? `: ${error}.` : '.'),
  refusedRows: (n) =>
    plural('es', n, { one: '1 fila que rechazó está apartada.', other: '{n} filas que rechazó están apartadas.' }),
  keptUploads: (n) =>
    plural('es', n, {
      one: '1 subida suya se guarda en la bandeja de entrada.',
      other: '{n} subidas suyas se guardan en la bandeja de entrada.',
    }),
  awaitsDrift: () =>
    'Espera que la base de datos vuelva a coincidir con sus declaraciones: ejecute la sentencia que se muestra en lo que espera el motor.',
  stalledSince: (messages, age) =>
    plural('es', messages, {
      one: '1 mensaje la espera y no ha aplicado nada',
      other: '{n} mensajes la esperan y no ha aplicado nada',
    }) + (age ? ` desde hace ${age}.` : '.'),
  wishCounts: (kind, n) =>
    ({
      pending: plural('es', n, { one: '1 deseo sin respuesta todavía.', other: '{n} deseos sin respuesta todavía.' }),
      waiting: plural('es', n, { one: '1 deseo espera en la réplica.', other: '{n} deseos esperan en la réplica.' }),
      refused: plural('es', n, { one: '1 deseo rechazado.', other: '{n} deseos rechazados.' }),
      superseded: plural('es', n, {
        one: '1 deseo encontró el valor cambiado allí antes.',
        other: '{n} deseos encontraron el valor cambiado allí antes.',
      }),
    })[kind],
  all: () => 'Todas',
  showing: (from, to, total) =>
    plural('es', total, { one: 'Se muestra la única réplica.', other: `Se muestran ${from}–${to} de {n}.` }),
  worstOf: (shown, total) =>
    plural('es', total, {
      one: 'La única réplica.',
      other: `Las ${shown} que más atención necesitan, de {n} en total.`,
    }),
  noneInState: () => 'Ninguna réplica está en este estado.',
  previous: () => 'Página anterior',
  next: () => 'Página siguiente',
  replicas: () => 'Réplicas',
  pickState: () => 'Mostrar las réplicas de un estado',
  tables: () => 'Tablas',
  tableColumns: { table: 'Tabla', pending: 'Pendientes', inFlight: 'En vuelo', setAside: 'Apartadas', unfiled: 'Sin archivar' },
  tableInSync: () => 'Sincronizada.',
  tableWaits: (p, f, s, u) =>
    `${plural('es', p, { one: '1 cambio pendiente', other: '{n} cambios pendientes' })}, ` +
    `${plural('es', f, { one: '1 fila en vuelo', other: '{n} filas en vuelo' })}, ` +
    `${plural('es', s, { one: '1 apartada', other: '{n} apartadas' })}, ` +
    `${plural('es', u, { one: '1 sin archivar', other: '{n} sin archivar' })}.`,
  problems: () => 'Lo que espera el motor',
  noProblem: () => 'Nada espera: ningún problema que mostrar.',
  remedy: {
    wait: 'Espera a la red o al motor: se resuelve solo.',
    fix: 'Espera que se despliegue un arreglo; luego el motor lo vuelve a intentar. No hay nada que editar a mano.',
  },
  notesWaiting: (n, age) =>
    plural('es', n, { one: '1 cambio todavía no está planificado', other: '{n} cambios todavía no están planificados' }) +
    (age ? `; el más antiguo se anotó ${age}.` : '.'),
  differs: (problem, age) => `${problem}${age ? ` (hallado ${age})` : ''}.`,
  runStatement: (n) =>
    plural('es', n, {
      one: 'Ejecute esta sentencia; luego el motor sigue solo.',
      other: 'Ejecute estas {n} sentencias; luego el motor sigue solo.',
    }),
  noStatement: () => 'El motor no da ninguna sentencia que ejecutar: haga lo que dice.',
  statementLabel: () => 'La sentencia que hay que ejecutar',
  copy: () => 'Copiar la sentencia',
  copied: () => 'Copiada.',
  copyFailed: () => 'No se pudo copiar: seleccione la sentencia y cópiela.',
  rowSetAside: (table, key, reason) => `Una fila de ${table} (${key}) está apartada en el servidor: ${reason}.`,
  rowRefused: (replica, table, key, reason, heldBack) =>
    heldBack
      ? `${replica} retuvo una fila de ${table} (${key}); le vuelve.`
      : `${replica} rechazó una fila de ${table} (${key}): ${reason}.`,
  uploadKept: (replica, table, key, reason, waiting) =>
    waiting
      ? `Una subida de ${replica} a ${table} (${key}) espera que se confirme su aprovisionamiento.`
      : `Una subida de ${replica} a ${table} (${key}) se guarda en la bandeja de entrada: ${reason}.`,
  sendsFail: (replica, failures, error) =>
    plural('es', failures, {
      one: `Un envío a ${replica} falló: ${error}.`,
      other: `Los envíos a ${replica} fallaron {n} veces seguidas: ${error}.`,
    }),
  stalledReplica: (replica, messages, age, heals) =>
    plural('es', messages, {
      one: `Se oye a ${replica}, pero no ha aplicado nada${age ? ` desde hace ${age}` : ''} mientras 1 mensaje la espera`,
      other: `Se oye a ${replica}, pero no ha aplicado nada${age ? ` desde hace ${age}` : ''} mientras {n} mensajes la esperan`,
    }) +
    (heals > 0
      ? plural('es', heals, {
          one: '; el motor intentó curarla una vez.',
          other: '; el motor intentó curarla {n} veces.',
        })
      : '.'),
  more: (n) => plural('es', n, { one: 'Y 1 más.', other: 'Y {n} más.' }),
  progressOf: (name) => `Dónde está ${name}, tabla por tabla`,
  holdsOf: (held, should) => plural('es', should, { one: `tiene ${held} de 1`, other: `tiene ${held} de {n}` }),
  progressColumns: { table: 'Tabla', holds: 'Tiene', inFlight: 'En camino', setAside: 'Apartadas', toRemove: 'Por soltar' },
  snapshotOnItsWay: () => 'Todo lo que debe tener va de nuevo en camino.',
  noProgress: () => 'El relevo todavía no ha visto esta réplica.',
  placesOf: (table, key) => `Dónde está ${table} ${key}`,
  place: {
    holds: 'La tiene.',
    outdated: 'Tiene una versión anterior.',
    on_its_way: 'La tiene en camino.',
    missing: 'No la tiene.',
    leaving: 'La está soltando.',
    set_aside: 'La tiene apartada.',
  },
  placeRefused: (reason) => `La rechazó: ${reason}.`,
  unconcerned: (n) =>
    plural('es', n, { one: 'Otra réplica no debe tenerla.', other: 'Otras {n} réplicas no deben tenerla.' }),
  why: () => '¿Por qué?',
  explainState: (name, state, should) => {
    const is = state === null ? 'no la tiene' : es.place[state].replace(/\.$/, '').toLowerCase()
    return `${name} ${is}, y ${should ? 'debe tenerla' : 'no debe tenerla'}.`
  },
  becauseRule: (rule) => `Su regla (${rule}) la envía allí.`,
  becauseFollows: (table, key) => `Sigue a ${table} ${key}, que va allí.`,
  becauseParentOf: (table, key) => `${table} ${key}, que va allí, apunta a ella.`,
  keptNoRule: (rule) => `Su regla (${rule}) no la envía allí.`,
  noRuleAssigned: (read, name, live) =>
    `Su regla (assigned) la envía solo a ${name} (${read})${live ? '' : `, y ${name} no está activa`}.`,
  noRuleAssignedToNone: (read) =>
    `Su regla (assigned) la envía a la réplica que nombra ${read}, y el motor no conoce esa réplica.`,
  noRuleFollows: (table, read) => `Sigue a ${table} (${read}), que esta réplica no debe tener.`,
  noRuleGrouped: (n) =>
    n === 0
      ? 'Su regla (grouped) la envía a las réplicas de sus grupos, y no es miembro de ninguno.'
      : plural('es', n, {
          one: 'Su regla (grouped) la envía a las réplicas de sus grupos: es miembro de 1, que no está dado a esta réplica.',
          other: 'Su regla (grouped) la envía a las réplicas de sus grupos: es miembro de {n}, ninguno dado a esta réplica.',
        }),
  noRuleNone: () =>
    'Su tabla no tiene regla propia (none): solo va donde una fila que se tiene allí apunta a ella, y ninguna lo hace.',
  keptNoSuchRow: () => 'No existe esa fila.',
  keptNotLive: () => 'La réplica no está activa.',
  keptOtherPartition: (row, replica) => `La fila es de la partición ${row}, la réplica de ${replica}.`,
  keptOutsideView: (view) => `La fila está fuera de la vista activa ${view}.`,
  keptRefused: (why) => `La réplica la rechazó: ${why}.`,
  keptSetAside: (table, key, why) => `${table} ${key} está apartada: ${why}.`,
  keptSnapshot: () => 'Todo va de nuevo en camino a la réplica.',
  keptUnknownReplica: () => 'El motor no conoce esta réplica.',
  keptOther: (reason) => `Se mantiene fuera (${reason}).`,
  wishes: () => 'Deseos',
  noWish: () => 'Ningún deseo que mostrar.',
  wishState: {
    refused: 'Rechazado',
    waiting: 'Espera en la réplica',
    pending: 'En camino',
    superseded: 'Superado: la réplica lo cambió antes',
    applied: 'Aplicado',
  },
  wishOf: (name, table, wanted) => `${name}, ${table}: ${wanted}`,
  wishReason: (reason) => `La réplica dice: ${reason}.`,
  wishNote: (note) => `Nota: ${note}.`,
  contractRefused: (got, reads) =>
    `Esta respuesta es del contrato ${String(got)} y este panel lee el contrato ${reads}: ` +
    'no se dibuja. Actualice el motor y el panel a la vez.',
  notAnAnswer: () => 'Esto no es una respuesta del motor: no se dibuja.',
  readFailed: (error) => `La última lectura falló (${error}); se muestra la última respuesta.`,
  ago: (ms) => ago('es', ms),
  span: (ms) => span('es', ms),
}

/** The locale the dashboard speaks for a host's locale tag ("es-MX" speaks Spanish). */
export function localeOf(tag: string | null | undefined): Locale {
  return tag && tag.toLowerCase().startsWith('es') ? 'es' : 'en'
}

/** The words of a locale tag. */
export function wordsFor(tag: string | null | undefined): Words {
  return localeOf(tag) === 'es' ? es : en
}

export const languages: Record<Locale, Words> = { en, es }
