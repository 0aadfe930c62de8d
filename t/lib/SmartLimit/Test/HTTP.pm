package SmartLimit::Test::HTTP;

# A minimal HTTP/1.1 client (one request per connection, "Connection: close")
# and a per-client cookie jar. Core perl only.

use strict;
use warnings;

use IO::Socket::INET ();
use IO::Select ();
use Time::HiRes ();
use Time::Local ();

# request(port => P, method => M, path => '/x', headers => [[name, value], ...],
#         body => STRING, timeout => SECONDS, local_addr => '127.0.0.7')
# local_addr: the source address the connection binds before connecting.
# Returns { status, reason, headers => [[name, value], ...], body, elapsed, error }.
# A transport failure gives status 599 and `error`.
sub request {
    my (%a) = @_;
    my $t0 = Time::HiRes::time();
    my $timeout = $a{timeout} || 10;
    my $deadline = $t0 + $timeout;
    my $method = $a{method} || 'GET';
    my $res = { status => 599, reason => '', headers => [], body => '', error => undef };

    my $finish = sub {
        $res->{elapsed} = Time::HiRes::time() - $t0;
        return $res;
    };

    my $sock = IO::Socket::INET->new(
        PeerAddr => $a{host} || '127.0.0.1',
        PeerPort => $a{port},
        Proto    => 'tcp',
        Timeout  => $timeout,
        (defined $a{local_addr} ? (LocalAddr => $a{local_addr}) : ()),
    );
    unless ($sock) {
        $res->{error} = "connect to port $a{port}"
            . (defined $a{local_addr} ? " from $a{local_addr}" : '') . " failed: $@";
        return $finish->();
    }
    if (defined $a{local_addr} && $sock->sockhost ne $a{local_addr}) {
        $res->{error} = "the connection came from " . $sock->sockhost . ", not from $a{local_addr}";
        close $sock;
        return $finish->();
    }
    $sock->autoflush(1);
    binmode $sock;

    my @headers = @{ $a{headers} || [] };
    my %have = map { (lc $_->[0] => 1) } @headers;
    my $body = defined $a{body} ? $a{body} : '';
    my $req = "$method $a{path} HTTP/1.1\r\n";
    $req .= "Host: localhost\r\n" unless $have{host};
    $req .= "Connection: close\r\n" unless $have{connection};
    $req .= "User-Agent: smart-limit-test\r\n" unless $have{'user-agent'};
    $req .= "Content-Length: " . length($body) . "\r\n"
        if length($body) && !$have{'content-length'};
    $req .= "$_->[0]: $_->[1]\r\n" for @headers;
    $req .= "\r\n" . $body;

    local $SIG{PIPE} = 'IGNORE';
    my $sel = IO::Select->new($sock);
    my $off = 0;
    while ($off < length $req) {
        my $left = $deadline - Time::HiRes::time();
        if ($left <= 0 || !$sel->can_write($left)) {
            $res->{error} = "timeout while sending the request";
            return $finish->();
        }
        my $n = syswrite($sock, $req, length($req) - $off, $off);
        unless (defined $n) {
            next if $!{EINTR} || $!{EAGAIN};
            $res->{error} = "send failed: $!";
            return $finish->();
        }
        $off += $n;
    }

    my $buf = '';
    my ($head_done, $want_len, $chunked, $body_start) = (0, undef, 0, 0);
    while (1) {
        if ($head_done) {
            last if $method eq 'HEAD';
            last if defined $want_len && length($buf) - $body_start >= $want_len;
            last if $chunked && _chunked_complete(substr($buf, $body_start));
        }
        my $left = $deadline - Time::HiRes::time();
        if ($left <= 0 || !$sel->can_read($left)) {
            $res->{error} = sprintf("timeout after %.1fs waiting for the response (%d bytes read)",
                                    $timeout, length $buf);
            last;
        }
        my $n = sysread($sock, $buf, 65536, length $buf);
        unless (defined $n) {
            next if $!{EINTR} || $!{EAGAIN};
            $res->{error} = "read failed: $!";
            last;
        }
        last if $n == 0;
        if (!$head_done) {
            my $end = index($buf, "\r\n\r\n");
            next if $end < 0;
            $head_done = 1;
            $body_start = $end + 4;
            _parse_head($res, substr($buf, 0, $end));
            my $te = header($res, 'Transfer-Encoding');
            my $cl = header($res, 'Content-Length');
            if (defined $te && $te =~ /chunked/i) {
                $chunked = 1;
            } elsif (defined $cl && $cl =~ /^\s*(\d+)\s*$/) {
                $want_len = $1;
            }
            $want_len = 0 if $res->{status} == 204 || $res->{status} == 304;
        }
    }
    close $sock;

    if (!$head_done) {
        $res->{status} = 599;
        $res->{error} ||= "connection closed before a complete response header ("
                          . length($buf) . " bytes)";
        return $finish->();
    }
    my $raw = substr($buf, $body_start);
    if ($method eq 'HEAD') {
        $raw = '';
    } elsif ($chunked) {
        my ($decoded, $ok) = _dechunk($raw);
        $res->{error} ||= "incomplete chunked body" unless $ok;
        $raw = $decoded;
    } elsif (defined $want_len) {
        $res->{error} ||= "short body: " . length($raw) . " of $want_len bytes"
            if length($raw) < $want_len;
        $raw = substr($raw, 0, $want_len);
    }
    $res->{body} = $raw;
    return $finish->();
}

sub _parse_head {
    my ($res, $head) = @_;
    my @lines = split /\r\n/, $head;
    my $status_line = shift @lines;
    if ($status_line =~ m{^HTTP/\d\.\d\s+(\d{3})\s*(.*)$}) {
        ($res->{status}, $res->{reason}) = ($1, $2);
    } else {
        $res->{status} = 599;
        $res->{error} = "bad status line: $status_line";
    }
    for my $l (@lines) {
        if ($l =~ /^([^:\s]+):\s*(.*?)\s*$/) {
            push @{ $res->{headers} }, [$1, $2];
        }
    }
}

sub _chunked_complete {
    my ($data) = @_;
    my (undef, $ok) = _dechunk($data);
    return $ok;
}

# Returns (decoded, complete?)
sub _dechunk {
    my ($data) = @_;
    my $out = '';
    my $pos = 0;
    while (1) {
        my $eol = index($data, "\r\n", $pos);
        return ($out, 0) if $eol < 0;
        my $line = substr($data, $pos, $eol - $pos);
        $line =~ s/;.*//;
        return ($out, 0) unless $line =~ /^\s*([0-9a-fA-F]+)\s*$/;
        my $size = hex $1;
        $pos = $eol + 2;
        if ($size == 0) {
            return ($out, index($data, "\r\n", $pos) >= 0 ? 1 : 0);
        }
        return ($out, 0) if length($data) < $pos + $size + 2;
        $out .= substr($data, $pos, $size);
        $pos += $size + 2;
    }
}

# All values of a header (case-insensitive name), in order.
sub header_values {
    my ($res, $name) = @_;
    return map { $_->[1] } grep { lc $_->[0] eq lc $name } @{ $res->{headers} || [] };
}

# First value of a header, or undef.
sub header {
    my ($res, $name) = @_;
    my @v = header_values($res, $name);
    return $v[0];
}

# A printable dump of a response, body cut to $max bytes.
sub dump_response {
    my ($res, $max) = @_;
    $max ||= 500;
    my $s = "status: $res->{status}" . ($res->{reason} ? " $res->{reason}" : '') . "\n";
    $s .= "transport error: $res->{error}\n" if $res->{error};
    $s .= sprintf("elapsed: %.3fs\n", $res->{elapsed} || 0);
    $s .= "  $_->[0]: $_->[1]\n" for @{ $res->{headers} || [] };
    my $b = $res->{body} // '';
    my $cut = length($b) > $max ? substr($b, 0, $max) . "... (" . length($b) . " bytes)" : $b;
    $s .= "body: $cut\n";
    return $s;
}

# Parses every Set-Cookie of a response:
# list of { name, value, deleted (bool), max_age, expires (epoch or undef), raw }.
sub set_cookies {
    my ($res) = @_;
    my @out;
    for my $raw (header_values($res, 'Set-Cookie')) {
        my ($pair, @attrs) = split /\s*;\s*/, $raw;
        next unless defined $pair && $pair =~ /^\s*([^=\s]+)\s*=\s*(.*?)\s*$/;
        my $c = { name => $1, value => $2, raw => $raw, deleted => 0 };
        $c->{value} =~ s/^"(.*)"$/$1/;
        my ($max_age, $expires);
        for my $a (@attrs) {
            if ($a =~ /^max-age\s*=\s*(-?\d+)$/i) {
                $max_age = $1;
            } elsif ($a =~ /^expires\s*=\s*(.+)$/i) {
                $expires = _parse_http_date($1);
            }
        }
        my $now = time;
        if (defined $max_age) {
            $c->{max_age} = $max_age;
            $c->{deleted} = 1 if $max_age <= 0;
            $c->{expires} = $now + $max_age;
        } elsif (defined $expires) {
            $c->{expires} = $expires;
            $c->{deleted} = 1 if $expires <= $now;
        }
        push @out, $c;
    }
    return @out;
}

my %MON = (jan => 0, feb => 1, mar => 2, apr => 3, may => 4, jun => 5,
           jul => 6, aug => 7, sep => 8, oct => 9, nov => 10, dec => 11);

sub _parse_http_date {
    my ($s) = @_;
    return undef
        unless $s =~ /(\d{1,2})[\s-]+([A-Za-z]{3})[A-Za-z]*[\s-]+(\d{2,4})\s+(\d\d):(\d\d):(\d\d)/;
    my ($d, $mon, $y, $h, $m, $sec) = ($1, $MON{ lc $2 }, $3, $4, $5, $6);
    return undef unless defined $mon;
    $y += $y < 70 ? 2000 : 1900 if $y < 100;
    my $t = eval { Time::Local::timegm($sec, $m, $h, $d, $mon, $y) };
    return $t;
}

package SmartLimit::Test::Jar;

# A cookie jar: insertion-ordered name => { value, expires }.

sub new {
    my ($class) = @_;
    return bless { order => [], c => {} }, $class;
}

sub set {
    my ($self, $name, $value, $expires) = @_;
    push @{ $self->{order} }, $name unless exists $self->{c}{$name};
    $self->{c}{$name} = { value => $value, expires => $expires };
}

# A jar holding the cookies of a Cookie request header ("a=1; b=2"), in order.
# A piece without '=' is kept as it is.
sub from_header {
    my ($class, $header) = @_;
    my $self = $class->new;
    for my $piece (split /\s*;\s*/, $header // '') {
        next unless length $piece;
        if ($piece =~ /^\s*([^=]*?)\s*=\s*(.*?)\s*$/ && length $1) {
            $self->set($1, $2);
        } else {
            $self->set($piece, undef);
        }
    }
    return $self;
}

sub delete {
    my ($self, $name) = @_;
    return unless exists $self->{c}{$name};
    delete $self->{c}{$name};
    $self->{order} = [ grep { $_ ne $name } @{ $self->{order} } ];
}

# Empties the jar (and forgets a prepend).
sub clear {
    my ($self) = @_;
    $self->{order} = [];
    $self->{c} = {};
    delete $self->{prepend};
}

# "NAME=VALUE" the client sends in front of the jar's cookies (a forged
# cookie placed first), or undef. Not part of the jar's cookies: Set-Cookie
# does not touch it, copy_from does not copy it.
sub prepend {
    my ($self, @v) = @_;
    $self->{prepend} = $v[0] if @v;
    return $self->{prepend};
}

sub _expire {
    my ($self) = @_;
    my $now = time;
    for my $n (@{ $self->{order} }) {
        my $e = $self->{c}{$n}{expires};
        $self->delete($n) if defined $e && $e <= $now;
    }
}

sub get {
    my ($self, $name) = @_;
    $self->_expire;
    return exists $self->{c}{$name} ? $self->{c}{$name}{value} : undef;
}

sub names {
    my ($self) = @_;
    $self->_expire;
    return @{ $self->{order} };
}

sub copy_from {
    my ($self, $other) = @_;
    for my $n ($other->names) {
        $self->set($n, $other->{c}{$n}{value}, $other->{c}{$n}{expires});
    }
}

# Value for a Cookie request header, or undef when empty.
sub cookie_header {
    my ($self) = @_;
    my @n = $self->names;
    return undef unless @n;
    return join '; ', map { defined $self->{c}{$_}{value} ? "$_=$self->{c}{$_}{value}" : $_ } @n;
}

# Stores or deletes what a response's Set-Cookie headers say.
sub absorb {
    my ($self, $res) = @_;
    for my $c (SmartLimit::Test::HTTP::set_cookies($res)) {
        if ($c->{deleted}) {
            $self->delete($c->{name});
        } else {
            $self->set($c->{name}, $c->{value}, $c->{expires});
        }
    }
}

1;
