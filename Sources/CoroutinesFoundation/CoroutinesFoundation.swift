// CoroutinesFoundation (see the FoundationWork and Sockets articles, <doc:FoundationWork>,
// <doc:Sockets>): Foundation work that suspends the calling coroutine instead of
// blocking its scheduler's thread — cokit's job for Swift on Linux and macOS. Each wrapper lives
// in its own file, named after the Foundation type it extends.
@_exported import Coroutines
