#!/bin/sh
# tests/upstream/mkcerts.sh DIR: the certificates weir-remote's tests use,
# made fresh with the openssl command (EC P-256 keys: fast):
#   ca.pem/ca.key        a test CA
#   good.pem/good.key    from the CA, for 127.0.0.1, ::1 and localhost
#   wrong.pem/wrong.key  from the CA, for wrong.example only
#   expired.pem/.key     from the CA, for 127.0.0.1/localhost, expired in 2020
#   self.pem/self.key    self-signed, for 127.0.0.1/localhost
#   other-ca.pem         a second CA that signed none of them
set -eu
d=$1
mkdir -p "$d"
cd "$d"
cat > ca.cnf <<'CNF'
[ ca ]
default_ca = d
[ d ]
dir = .
database = index.txt
new_certs_dir = .
serial = serial
default_md = sha256
policy = p
copy_extensions = copy
unique_subject = no
[ p ]
commonName = supplied
CNF
: > index.txt
echo 01 > serial
key() { openssl ecparam -name prime256v1 -genkey -noout -out "$1" 2>/dev/null; }
key ca.key
openssl req -x509 -new -key ca.key -out ca.pem -days 30 -subj /CN=weir-test-ca 2>/dev/null
key other-ca.key
openssl req -x509 -new -key other-ca.key -out other-ca.pem -days 30 -subj /CN=weir-other-ca 2>/dev/null
sign() { # name san start end
	key "$1.key"
	openssl req -new -key "$1.key" -out "$1.csr" -subj "/CN=$1" -addext "subjectAltName=$2" 2>/dev/null
	openssl ca -batch -config ca.cnf -cert ca.pem -keyfile ca.key -in "$1.csr" -out "$1.pem" \
	    -startdate "$3" -enddate "$4" >/dev/null 2>&1
}
now=$(date -u +%Y%m%d%H%M%SZ)
later=$(date -u -d '+30 days' +%Y%m%d%H%M%SZ)
sign good "IP:127.0.0.1,IP:::1,DNS:localhost" "$now" "$later"
sign wrong "DNS:wrong.example" "$now" "$later"
sign expired "IP:127.0.0.1,DNS:localhost" 20200101000000Z 20200102000000Z
key self.key
openssl req -x509 -new -key self.key -out self.pem -days 30 -subj /CN=localhost \
    -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" 2>/dev/null
# SHA-256 fingerprint of the good certificate, for pinning tests.
openssl x509 -in good.pem -noout -fingerprint -sha256 | sed 's/.*=//' > good.sha256
