#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/kdf.h>
#include <openssl/rand.h>
#include <openssl/err.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <openssl/rsa.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/param_build.h>
#include <openssl/x509.h>
/* Apple's signed data: x5c chains, PEM roots and .p8 keys, ES256 signatures (AppleSignedData.swift). */
#include <openssl/x509v3.h>
#include <openssl/pem.h>
#include <openssl/ec.h>

/* Key construction and one-shot signatures. OpenSSL 3 builds keys from parameters through
 * macros and variadic calls Swift cannot import, so these few helpers are C. */

/* An RSA public key from its big-endian modulus and exponent (a JWK's n and e). NULL on failure. */
static inline EVP_PKEY *
ccrypto_rsa_public_from_ne(const unsigned char *n, size_t nlen, const unsigned char *e, size_t elen)
{
  EVP_PKEY *pkey = NULL;
  BIGNUM *bn_n = BN_bin2bn(n, (int) nlen, NULL), *bn_e = BN_bin2bn(e, (int) elen, NULL);
  OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
  OSSL_PARAM *params = NULL;
  EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, "RSA", NULL);
  if (bn_n && bn_e && bld && ctx
      && OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, bn_n)
      && OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, bn_e)
      && (params = OSSL_PARAM_BLD_to_param(bld)) != NULL
      && EVP_PKEY_fromdata_init(ctx) == 1) {
    if (EVP_PKEY_fromdata(ctx, &pkey, EVP_PKEY_PUBLIC_KEY, params) != 1) pkey = NULL;
  }
  EVP_PKEY_CTX_free(ctx);
  OSSL_PARAM_free(params);
  OSSL_PARAM_BLD_free(bld);
  BN_free(bn_n);
  BN_free(bn_e);
  return pkey;
}

/* A fresh RSA key pair (tests make their own Sign in with Apple keys). */
static inline EVP_PKEY *
ccrypto_rsa_generate(unsigned int bits)
{
  return EVP_RSA_gen(bits);
}

/* Writes n and e of an RSA key, big-endian; answers 1 on success. Buffers of 1024 bytes suffice. */
static inline int
ccrypto_rsa_export_ne(EVP_PKEY *key, unsigned char *n, size_t *nlen, unsigned char *e, size_t *elen)
{
  BIGNUM *bn_n = NULL, *bn_e = NULL;
  int ok = EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_RSA_N, &bn_n) == 1
        && EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_RSA_E, &bn_e) == 1;
  if (ok) {
    *nlen = (size_t) BN_bn2bin(bn_n, n);
    *elen = (size_t) BN_bn2bin(bn_e, e);
  }
  BN_free(bn_n);
  BN_free(bn_e);
  return ok;
}

/* Ed25519 keys from their 32 raw bytes. */
static inline EVP_PKEY *
ccrypto_ed25519_private(const unsigned char *raw)
{
  return EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, raw, 32);
}

static inline EVP_PKEY *
ccrypto_ed25519_public(const unsigned char *raw)
{
  return EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, raw, 32);
}

static inline int
ccrypto_ed25519_public_of(EVP_PKEY *key, unsigned char *out)
{
  size_t len = 32;
  return EVP_PKEY_get_raw_public_key(key, out, &len) == 1 && len == 32;
}

/* A key as DER, written to out (cap bytes): its public half as SubjectPublicKeyInfo when
 * public_half is 1, else the private key (PKCS#1 for RSA). Answers the length, 0 on failure or
 * when it does not fit. */
static inline size_t
ccrypto_key_to_der(EVP_PKEY *key, int public_half, unsigned char *out, size_t cap)
{
  int len = public_half ? i2d_PUBKEY(key, NULL) : i2d_PrivateKey(key, NULL);
  if (len <= 0 || (size_t) len > cap) return 0;
  unsigned char *p = out;
  return (public_half ? i2d_PUBKEY(key, &p) : i2d_PrivateKey(key, &p)) == len ? (size_t) len : 0;
}

/* A key from DER: SubjectPublicKeyInfo when public_half is 1, else a private key of any type
 * OpenSSL recognises. NULL on failure. */
static inline EVP_PKEY *
ccrypto_key_from_der(const unsigned char *der, size_t len, int public_half)
{
  const unsigned char *p = der;
  return public_half ? d2i_PUBKEY(NULL, &p, (long) len) : d2i_AutoPrivateKey(NULL, &p, (long) len);
}

/* 1 for an RSA key, 2 for Ed25519, 0 for any other type. */
static inline int
ccrypto_key_kind(EVP_PKEY *key)
{
  int id = EVP_PKEY_get_base_id(key);
  return id == EVP_PKEY_RSA ? 1 : id == EVP_PKEY_ED25519 ? 2 : 0;
}

/* Signs msg (SHA-256 for RSA; sha256 = 0 for Ed25519, which hashes itself). Answers the
 * signature length, 0 on failure. sig must hold 1024 bytes. */
static inline size_t
ccrypto_sign(EVP_PKEY *key, int sha256, const unsigned char *msg, size_t len, unsigned char *sig)
{
  size_t siglen = 1024;
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  int ok = ctx && EVP_DigestSignInit(ctx, NULL, sha256 ? EVP_sha256() : NULL, NULL, key) == 1
              && EVP_DigestSign(ctx, sig, &siglen, msg, len) == 1;
  EVP_MD_CTX_free(ctx);
  return ok ? siglen : 0;
}

/* An RSA/SHA-256 verification context for key, set up once: ccrypto_verify_from copies it for
 * each signature instead of looking up the digest and setting up the key's context every time
 * (about a quarter of a verification's time in OpenSSL 3). NULL on failure. */
static inline EVP_MD_CTX *
ccrypto_verifier(EVP_PKEY *key)
{
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  if (ctx && EVP_DigestVerifyInit(ctx, NULL, EVP_sha256(), NULL, key) == 1) return ctx;
  EVP_MD_CTX_free(ctx);
  return NULL;
}

/* Answers 1 when sig is a valid signature of msg, checked with a copy of base (which is only read,
 * so threads may share it). */
static inline int
ccrypto_verify_from(const EVP_MD_CTX *base, const unsigned char *msg, size_t len, const unsigned char *sig, size_t siglen)
{
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  int ok = ctx && EVP_MD_CTX_copy_ex(ctx, base) == 1 && EVP_DigestVerify(ctx, sig, siglen, msg, len) == 1;
  EVP_MD_CTX_free(ctx);
  return ok;
}

/* Answers 1 when sig is a valid signature of msg by key. */
static inline int
ccrypto_verify(EVP_PKEY *key, int sha256, const unsigned char *msg, size_t len, const unsigned char *sig, size_t siglen)
{
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  int ok = ctx && EVP_DigestVerifyInit(ctx, NULL, sha256 ? EVP_sha256() : NULL, NULL, key) == 1
              && EVP_DigestVerify(ctx, sig, siglen, msg, len) == 1;
  EVP_MD_CTX_free(ctx);
  return ok;
}
