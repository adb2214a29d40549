// The reads, fetched from the magic-sync-dashboard that served this page.
// A token, when the server asks for one, comes in the page's address after
// `#token=` (never sent in a request's address), and is kept for the tab.

const TOKEN = 'magic-sync-dashboard-token'

function token(): string | null {
  const m = /(?:^#|&)token=([^&]+)/.exec(location.hash)
  if (m) {
    sessionStorage.setItem(TOKEN, decodeURIComponent(m[1]))
    history.replaceState(null, '', location.pathname + location.search)
  }
  return sessionStorage.getItem(TOKEN)
}

/** The JSON of one read, and its size in bytes as it came. */
export interface Fetched {
  value: unknown
  bytes: number
}

async function get(path: string): Promise<Fetched> {
  const t = token()
  const response = await fetch(`api/${path}`, { headers: t ? { Authorization: `Bearer ${t}` } : {} })
  const text = await response.text()
  if (!response.ok) {
    let why = text
    try {
      why = (JSON.parse(text) as { error?: string }).error ?? text
    } catch {
      // not JSON: the text as it is
    }
    throw new Error(`${response.status}: ${why}`)
  }
  return { value: JSON.parse(text), bytes: new TextEncoder().encode(text).length }
}

const q = (params: Record<string, string | number | null>) =>
  Object.entries(params)
    .filter(([, v]) => v !== null)
    .map(([k, v]) => `${k}=${encodeURIComponent(String(v))}`)
    .join('&')

export const api = {
  settings: () => get('settings'),
  overview: () => get('overview'),
  listing: (state: string | null, offset: number) => get(`listing?${q({ state, offset })}`),
  progress: (replica: string) => get(`progress/${encodeURIComponent(replica)}`),
  wishes: () => get('wishes'),
  row: (table: string, key: string) => get(`row/${encodeURIComponent(table)}/${encodeURIComponent(key)}`),
  explain: (replica: string, table: string, key: string) =>
    get(`explain/${encodeURIComponent(replica)}/${encodeURIComponent(table)}/${encodeURIComponent(key)}`),
}
