#!/usr/bin/env sh
# Makes what the deployment examples mount: a random token, a self-signed CA, and a gateway certificate signed
# by that CA. Needs openssl.
#
#   sh make-secrets.sh [OUT_DIR [EXTRA_DNS_NAME...]]
#
# OUT_DIR defaults to ./secrets beside this script (git-ignored). It gets token, ca.crt, ca.key, tls.crt, tls.key.
# The certificate names localhost and 127.0.0.1, the compose services (gateway-1, gateway-2) and the Kubernetes
# Service (ext-gateway, ext-gateway.<namespace>.svc[.cluster.local] for the namespaces default and ext), plus any
# EXTRA_DNS_NAME given.
#
# The files are world-readable inside a directory only you can enter: compose mounts them (bind mounts keep the
# host's modes) into containers that run as uid 10001, not as you. Keep ca.key out of every container.
set -eu

out=${1:-"$(dirname "$0")/secrets"}
[ $# -gt 0 ] && shift

san="DNS:localhost,IP:127.0.0.1,DNS:gateway-1,DNS:gateway-2,DNS:ext-gateway"
for ns in default ext; do
  san="$san,DNS:ext-gateway.$ns.svc,DNS:ext-gateway.$ns.svc.cluster.local"
done
for name in "$@"; do
  san="$san,DNS:$name"
done

mkdir -p "$out"
chmod 700 "$out"
cd "$out"

openssl rand -hex 32 > token
openssl req -x509 -newkey rsa:2048 -nodes -days 365 -subj "/CN=ext example CA" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
  -keyout ca.key -out ca.crt 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "/CN=ext-gateway" -keyout tls.key -out tls.csr 2>/dev/null
printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n' "$san" > tls.ext
openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 365 -extfile tls.ext \
  -out tls.crt 2>/dev/null
rm -f tls.csr tls.ext ca.srl
chmod 600 ca.key
chmod 644 token ca.crt tls.crt tls.key
echo "wrote token, ca.crt, ca.key, tls.crt, tls.key in $(pwd)"
