/// An entry of a run queue: a coroutine to resume, or a job to run on the loop's own stack.
///
/// `@unchecked Sendable`: a job is created for and only run on its scheduler's thread; it crosses
/// threads only through the incoming queue (``WakeUpQueue``), whose atomic head orders it.
enum Runnable: @unchecked Sendable {
    case coroutine(Coroutine)
    case job(() -> Void)
}
