// Plain data and sentences of the shop's pages, apart from Vue, and the
// requests both pages make to the program that served them.

export interface Product {
  id: string
  name: string
  price_cents: number
}

export interface Register {
  id: string
  name: string
}

/** A line of a receipt: a product, how many, at what price each. */
export interface ReceiptLine {
  /** The product's name; null at the head office once it was deleted. */
  product: string | null
  quantity: number
  price_cents: number
  /** On a register: the product was deleted at the head office, and is
   * kept here only for its receipts. */
  retired?: boolean
}

export interface Receipt {
  id: string
  register_id?: string
  register?: string
  total_cents: number
  sold_at: string
  /** Its lines, as both programs answer (left out where only the receipt
   * counts, as in counting the receipts filed). */
  lines?: ReceiptLine[]
}

/** What a register's page shows of it. */
export interface RegisterState {
  id: string
  name: string
  online: boolean
  connection: string
  products: Product[]
  receipts: Receipt[]
  not_at_head_office: number
}

/** 250 → "2.50". */
export function money(cents: number): string {
  const sign = cents < 0 ? '-' : ''
  const c = Math.abs(cents)
  return `${sign}${Math.floor(c / 100)}.${String(c % 100).padStart(2, '0')}`
}

/** "2.50", "2,5" or "3" → cents; null when it is not a price. */
export function cents(text: string): number | null {
  const m = /^\s*(\d+)(?:[.,](\d{1,2}))?\s*$/.exec(text)
  if (!m) return null
  return Number(m[1]) * 100 + Number((m[2] ?? '0').padEnd(2, '0'))
}

/** "Coffee 3.00", or "2 × Tea 5.00": a line as a receipt prints it. */
export function lineSentence(line: ReceiptLine): string {
  const name = line.product ?? 'a product since deleted'
  const amount = money(line.quantity * line.price_cents)
  return line.quantity === 1 ? `${name} ${amount}` : `${line.quantity} × ${name} ${amount}`
}

/** A sale being made: each product once, with how many. */
export interface SaleLine {
  product: Product
  quantity: number
}

/** `quantity` more of `product` on the sale being made. */
export function withMore(lines: SaleLine[], product: Product, quantity: number): SaleLine[] {
  const found = lines.find((l) => l.product.id === product.id)
  if (found) return lines.map((l) => (l === found ? { ...l, quantity: l.quantity + quantity } : l))
  return [...lines, { product, quantity }]
}

/** What the sale being made comes to. */
export function saleTotal(lines: SaleLine[]): number {
  return lines.reduce((sum, l) => sum + l.quantity * l.product.price_cents, 0)
}

/** "2 receipts not at the head office yet", or that all are. */
export function notAtHeadOfficeSentence(n: number): string {
  if (n === 0) return 'Every receipt is at the head office.'
  return `${n} ${n === 1 ? 'receipt' : 'receipts'} not at the head office yet`
}

/** The receipts filed, counted per register. */
export function receiptsPerRegister(receipts: Receipt[]): Map<string, number> {
  const counts = new Map<string, number>()
  for (const r of receipts) counts.set(r.register ?? '', (counts.get(r.register ?? '') ?? 0) + 1)
  return counts
}

/** Each register's id with its name, as the dashboard's `names` prop. */
export function namesOf(registers: Register[]): Record<string, string> {
  return Object.fromEntries(registers.map((r) => [r.id, r.name]))
}

async function request<T>(method: string, path: string, body?: unknown): Promise<T> {
  const response = await fetch(`api/${path}`, {
    method,
    headers: body === undefined ? {} : { 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  const text = await response.text()
  if (!response.ok) {
    let why = text
    try {
      why = (JSON.parse(text) as { error?: string }).error ?? text
    } catch {
      // not JSON: the text as it is
    }
    throw new Error(why)
  }
  return JSON.parse(text) as T
}

export const get = <T>(path: string) => request<T>('GET', path)
export const post = <T>(path: string, body?: unknown) => request<T>('POST', path, body ?? {})
export const patch = <T>(path: string, body: unknown) => request<T>('PATCH', path, body)
export const remove = <T>(path: string) => request<T>('DELETE', path)
