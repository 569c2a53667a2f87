#include <curl/curl.h>

/* Swift cannot call C variadic functions: curl_easy_setopt, curl_easy_getinfo and
 * curl_multi_setopt take their value through "...". Each wrapper below passes one type of value,
 * the type libcurl documents for the options it is used with. */

static inline CURLcode
ccurl_setopt_long(CURL *easy, CURLoption option, long value)
{
  return curl_easy_setopt(easy, option, value);
}

static inline CURLcode
ccurl_setopt_off(CURL *easy, CURLoption option, curl_off_t value)
{
  return curl_easy_setopt(easy, option, value);
}

/* Strings are copied by libcurl (except CURLOPT_POSTFIELDS, which is not used: the body goes
 * through CURLOPT_COPYPOSTFIELDS). */
static inline CURLcode
ccurl_setopt_string(CURL *easy, CURLoption option, const char *value)
{
  return curl_easy_setopt(easy, option, value);
}

/* Lists are not copied: the caller keeps them until the transfer is cleaned up. */
static inline CURLcode
ccurl_setopt_list(CURL *easy, CURLoption option, struct curl_slist *value)
{
  return curl_easy_setopt(easy, option, value);
}

/* CURLOPT_WRITEDATA, CURLOPT_HEADERDATA, CURLOPT_ERRORBUFFER, CURLOPT_COPYPOSTFIELDS. */
static inline CURLcode
ccurl_setopt_pointer(CURL *easy, CURLoption option, void *value)
{
  return curl_easy_setopt(easy, option, value);
}

/* CURLOPT_WRITEFUNCTION and CURLOPT_HEADERFUNCTION share this signature. */
static inline CURLcode
ccurl_setopt_receiver(CURL *easy, CURLoption option, curl_write_callback value)
{
  return curl_easy_setopt(easy, option, value);
}

static inline CURLcode
ccurl_getinfo_long(CURL *easy, CURLINFO info, long *value)
{
  return curl_easy_getinfo(easy, info, value);
}

/* CURL_GLOBAL_DEFAULT is a macro of macros, which Swift does not import. */
static inline CURLcode
ccurl_global_init(void)
{
  return curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* CURLOPT_READFUNCTION: the body of an upload (a mail message to SMTP). */
static inline CURLcode
ccurl_setopt_reader(CURL *easy, CURLoption option, curl_read_callback value)
{
  return curl_easy_setopt(easy, option, value);
}
