// @vitest-environment node
// The package's types are those the engine's answers give, field for
// field: the types file is what scripts/contract.mjs writes from the golden
// files and fixtures, and every answer is read by this package.
import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
// @ts-expect-error: a plain ES module script, without types
import { answers as read, target, typesText } from '../../scripts/contract.mjs'
import { CONTRACT, readAnswer } from '../../src/core'
import { answers } from '../answers'

describe('the contract', () => {
  it('has types written from the engine’s answers as they are now', () => {
    expect(readFileSync(target, 'utf8')).toBe(typesText(read()))
  })

  it('is read from every read in every state', () => {
    for (const read of ['overview', 'listing', 'health', 'progress', 'row-progress', 'explain', 'wishes']) {
      expect(Object.keys(answers).some((name) => name.startsWith(`${read}-`)), read).toBe(true)
    }
  })

  it('reads every answer of the contract the engine answers', () => {
    for (const [name, value] of Object.entries(answers)) {
      expect(readAnswer(value).ok, name).toBe(true)
      expect((value as { contract: number }).contract, name).toBe(CONTRACT)
    }
  })

  it('refuses an answer of another contract, saying so', () => {
    const later = { ...(answers['overview-synced'] as object), contract: CONTRACT + 1 }
    expect(readAnswer(later)).toEqual({ ok: false, got: CONTRACT + 1, reason: 'contract' })
    expect(readAnswer('overview')).toEqual({ ok: false, got: undefined, reason: 'not_an_answer' })
  })
})
