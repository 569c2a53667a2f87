package dev.redeem.android

import org.json.JSONArray
import org.json.JSONObject
import java.io.File

/**
 * A redemption the app started and has not seen settle: reserved at the server, its Play purchase
 * perhaps made ([purchaseToken]) but not yet posted. Kept so that a relaunch finishes it.
 */
data class PendingRedemption(
    val redemptionId: String,
    val code: String,
    val productId: String?,
    val basePlanId: String?,
    val purchaseToken: String? = null,
    /** The Play subscription product launched (to find Play's purchase of it after a relaunch). */
    val playProductId: String? = null
) {
    fun toJson(): JSONObject = JSONObject().apply {
        put("redemptionId", redemptionId)
        put("code", code)
        productId?.let { put("productId", it) }
        basePlanId?.let { put("basePlanId", it) }
        purchaseToken?.let { put("purchaseToken", it) }
        playProductId?.let { put("playProductId", it) }
    }

    companion object {
        fun fromJson(o: JSONObject) = PendingRedemption(
            redemptionId = o.getString("redemptionId"),
            code = o.getString("code"),
            productId = if (o.has("productId")) o.getString("productId") else null,
            basePlanId = if (o.has("basePlanId")) o.getString("basePlanId") else null,
            purchaseToken = if (o.has("purchaseToken")) o.getString("purchaseToken") else null,
            playProductId = if (o.has("playProductId")) o.getString("playProductId") else null
        )
    }
}

/**
 * Where the client keeps [PendingRedemption]s across launches. [FilePendingStore] is the default;
 * an app may back it with DataStore or its database instead. Calls come from the client's I/O
 * threads, one at a time per client.
 */
interface PendingStore {
    fun load(): List<PendingRedemption>
    fun save(pending: List<PendingRedemption>)
}

/**
 * A JSON file (on Android, under `context.filesDir`), written whole to a temporary file and
 * renamed over the old one, so a crash mid-write leaves the previous list.
 */
class FilePendingStore(private val file: File) : PendingStore {
    private val lock = Any()

    override fun load(): List<PendingRedemption> = synchronized(lock) {
        if (!file.exists()) return emptyList()
        val items = JSONArray(file.readText(Charsets.UTF_8))
        (0 until items.length()).map { PendingRedemption.fromJson(items.getJSONObject(it)) }
    }

    override fun save(pending: List<PendingRedemption>) = synchronized(lock) {
        file.parentFile?.mkdirs()
        val items = JSONArray()
        pending.forEach { items.put(it.toJson()) }
        val temporary = File(file.path + ".tmp")
        temporary.writeText(items.toString(), Charsets.UTF_8)
        if (!temporary.renameTo(file)) {
            file.delete()
            check(temporary.renameTo(file)) { "can't write ${file.path}" }
        }
    }
}

/** A store that forgets everything at exit (tests, or an app that resumes nothing). */
class MemoryPendingStore : PendingStore {
    private var items: List<PendingRedemption> = emptyList()
    @Synchronized override fun load() = items
    @Synchronized override fun save(pending: List<PendingRedemption>) { items = pending }
}
