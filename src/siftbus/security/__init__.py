"""The security layer: TLS contexts, principals, tokens, rights and quotas.

Servers and clients of every other layer take what they need from here:

* :mod:`.tls` builds server and client :class:`ssl.SSLContext` objects from certificate
  paths (mutual TLS between brokers) and reloads certificates without a restart;
* :mod:`.certs` creates a certificate authority and issues server and client
  certificates (``siftbus certs init|issue``);
* :mod:`.tokens` signs and verifies bearer tokens (JWT, HMAC-SHA256, through PyJWT);
* :mod:`.principal` is who a connection is, once authenticated;
* :mod:`.rights` decides what a principal may publish, subscribe, advertise and call,
  with rights written as profiles and checked by the covering relation (content-based
  access control);
* :mod:`.quotas` bounds what a principal may hold and how fast it may publish;
* :mod:`.policy` reads all of it from the ``[security]`` section of a network config and
  counts and logs every denial.
"""
