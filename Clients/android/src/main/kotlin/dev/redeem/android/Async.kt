package dev.redeem.android

import java.util.concurrent.CountDownLatch
import java.util.concurrent.ExecutorService
import java.util.concurrent.Executors
import kotlin.coroutines.Continuation
import kotlin.coroutines.EmptyCoroutineContext
import kotlin.coroutines.resume
import kotlin.coroutines.resumeWithException
import kotlin.coroutines.startCoroutine
import kotlin.coroutines.suspendCoroutine

// Suspension with the standard library alone, so an app is not tied to a kotlinx.coroutines
// version: blocking HTTP runs on a small pool of daemon threads, and the caller's coroutine is
// resumed from there (kotlinx.coroutines' dispatchers then move it back where it belongs).

/** The threads the client's blocking I/O runs on (daemons: they never keep a process alive). */
internal object IoThreads {
    val pool: ExecutorService = Executors.newCachedThreadPool { task ->
        Thread(task, "redeem-io").apply { isDaemon = true }
    }
}

/** Runs [work] on [IoThreads] and resumes the caller with its value or its exception. */
internal suspend fun <T> onIoThread(work: () -> T): T = suspendCoroutine { continuation ->
    IoThreads.pool.execute {
        val value = try {
            work()
        } catch (error: Throwable) {
            continuation.resumeWithException(error)
            return@execute
        }
        continuation.resume(value)
    }
}

/**
 * Runs a suspending call to its end on the calling thread, for Java callers, tests and tools
 * (an app calls the client from its own coroutine scope instead). Never call it on Android's
 * main thread.
 */
fun <T> blocking(call: suspend () -> T): T {
    val done = CountDownLatch(1)
    var value: T? = null
    var failure: Throwable? = null
    call.startCoroutine(Continuation(EmptyCoroutineContext) { result ->
        result.fold({ value = it }, { failure = it })
        done.countDown()
    })
    done.await()
    failure?.let { throw it }
    @Suppress("UNCHECKED_CAST")
    return value as T
}
