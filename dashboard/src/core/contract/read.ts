// An answer is drawn only if it is of the contract this package reads:
// one of another version may mean other things by the same fields.
import { CONTRACT } from './types'

export type Read<T> = { ok: true; answer: T } | { ok: false; got: unknown; reason: 'contract' | 'not_an_answer' }

/** Takes an answer of the engine's as it came, or says why it is refused. */
export function readAnswer<T extends { contract: number }>(value: unknown): Read<T> {
  if (value === null || typeof value !== 'object' || Array.isArray(value) || !('contract' in value)) {
    return { ok: false, got: undefined, reason: 'not_an_answer' }
  }
  const got = (value as { contract: unknown }).contract
  if (got !== CONTRACT) return { ok: false, got, reason: 'contract' }
  return { ok: true, answer: value as T }
}
