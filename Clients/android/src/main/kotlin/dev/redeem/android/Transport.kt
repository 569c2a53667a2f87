package dev.redeem.android

import org.json.JSONException
import org.json.JSONObject
import java.io.IOException
import java.io.InputStream
import java.net.HttpURLConnection
import java.net.URL

/** One answer of the gateway: its status, its body as text and the headers the client reads. */
internal class Answer(val status: Int, val text: String, val location: String?, val requestId: String?) {
    /** The body as a JSON object (the API answers objects only). */
    fun json(): JSONObject = try {
        JSONObject(text)
    } catch (error: JSONException) {
        throw RedeemNetworkException("the server answered $status with a body that is not JSON", error)
    }
}

/**
 * Blocking JSON over `HttpURLConnection`, the HTTP client Android and the JVM share. Errors in the
 * API's shape (`{"error": {"code", "message", "field"?}}`) become [RedeemApiException]; anything
 * else that went wrong, [RedeemNetworkException].
 */
internal class Transport(baseUrl: String, private val timeoutMillis: Int, private val appId: String? = null) {
    private val base = baseUrl.trimEnd('/')

    /**
     * Sends [method] to [path] with an optional JSON [body] and bearer [token]. [extraReadMillis]
     * lengthens the read timeout for a long poll. A 3xx is answered, not followed.
     */
    fun send(method: String, path: String, body: JSONObject? = null, token: String? = null, extraReadMillis: Int = 0): Answer {
        val connection = try {
            URL(base + path).openConnection() as HttpURLConnection
        } catch (error: IOException) {
            throw RedeemNetworkException("can't reach ${base + path}: ${error.message}", error)
        }
        try {
            connection.requestMethod = method
            connection.instanceFollowRedirects = false
            connection.connectTimeout = timeoutMillis
            connection.readTimeout = timeoutMillis + extraReadMillis
            connection.setRequestProperty("Accept", "application/json")
            if (token != null) connection.setRequestProperty("Authorization", "Bearer $token")
            if (appId != null) connection.setRequestProperty("Redeem-App", appId)
            if (body != null) {
                val bytes = body.toString().toByteArray(Charsets.UTF_8)
                connection.doOutput = true
                connection.setRequestProperty("Content-Type", "application/json")
                connection.outputStream.use { it.write(bytes) }
            }
            val status = connection.responseCode
            val stream: InputStream? = if (status >= 400) connection.errorStream else connection.inputStream
            val text = stream?.use { String(it.readBytes(), Charsets.UTF_8) } ?: ""
            return Answer(status, text, connection.getHeaderField("Location"), connection.getHeaderField("X-Request-Id"))
        } catch (error: IOException) {
            throw RedeemNetworkException("$method $path failed: ${error.message}", error)
        } finally {
            connection.disconnect()
        }
    }

    /** Sends and answers a 2xx, or throws the API's error. */
    fun checked(method: String, path: String, body: JSONObject? = null, token: String? = null, extraReadMillis: Int = 0): Answer {
        val answer = send(method, path, body, token, extraReadMillis)
        if (answer.status !in 200..299) throw apiError(answer)
        return answer
    }

    /** Sends and answers the JSON body of a 2xx, or throws the API's error. */
    fun json(method: String, path: String, body: JSONObject? = null, token: String? = null, extraReadMillis: Int = 0): JSONObject =
        checked(method, path, body, token, extraReadMillis).json()

    companion object {
        /** The API's error for an answer that is not a success. */
        fun apiError(answer: Answer): RedeemApiException {
            val error = try {
                RedeemJson.apiError(JSONObject(answer.text), answer.status)
            } catch (_: JSONException) {
                null
            }
            return error?.let {
                RedeemApiException(it.status, it.code, it.message ?: it.code, it.field, answer.requestId, it.redeemUrl)
            } ?: RedeemApiException(answer.status, "http${answer.status}", "the server answered ${answer.status}", null, answer.requestId)
        }
    }
}
