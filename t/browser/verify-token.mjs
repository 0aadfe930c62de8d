// Verifies an admission token with jose (npm), a JWT library independent of the module and of
// PyJWT, against the key set URL the room serves (t/380-tokens.t, t/lib/token_probe.py).
//   node verify-token.mjs JWKS_URL TOKEN ISSUER [AUDIENCE]
//     -> prints the claims, exit 0; else exit 1
import { createRemoteJWKSet, jwtVerify } from "jose";

const [url, token, issuer, audience] = process.argv.slice(2);
try {
  const keys = createRemoteJWKSet(new URL(url));
  const { payload, protectedHeader } = await jwtVerify(token, keys, {
    issuer,
    ...(audience ? { audience } : {}),
    algorithms: ["EdDSA", "ES256"],
    requiredClaims: ["exp", "iat", "sub", "jti"],
  });
  if (!protectedHeader.kid) throw new Error("no kid");
  process.stdout.write(JSON.stringify(payload));
} catch (e) {
  process.stdout.write(`refused: ${e.code || ""} ${e.message}\n`);
  process.exit(1);
}
