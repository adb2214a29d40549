// magic_sync_dashboard/core: the engine's answers as plain data and
// sentences, for a host that draws them with its own parts. No Vue here.
export * from './contract/types'
export { readAnswer, type Read } from './contract/read'
export { type ServerClock, parseServerTime, clockOf, serverNow, ageOf, isSilent } from './time'
export { plural, ago, span, type Forms } from './plural'
export { type Words, type Locale, type Tone, type KnownState, languages, localeOf, wordsFor } from './words'
export * from './view'
