//! The challenge's solver (`challenge=pow`, [S19]): the script the built-in challenge page
//! carries, and a custom page's `{{challenge_script}}` writes.

/// The challenge page's solver (`challenge=pow`): a Web Worker made from the page's own text
/// (no external resources) finds a nonce whose SHA-256 over the seed's bytes and the nonce's
/// digits starts with `bits` zero bits, reporting its progress; the page then keeps the proof
/// as the room's proof cookie and loads itself again. The seed and the nonce fit one block of
/// SHA-256 (at most 9 + 20 bytes), so the worker hashes one block per try. The progress is
/// shown in the element `progress` where the page has one (a custom page may not).
pub(super) const SOLVER: &str = "<script id=\"sl-pow\" type=\"text/plain\">\
var K=[1116352408,1899447441,3049323471,3921009573,961987163,1508970993,2453635748,2870763221,\
3624381080,310598401,607225278,1426881987,1925078388,2162078206,2614888103,3248222580,\
3835390401,4022224774,264347078,604807628,770255983,1249150122,1555081692,1996064986,\
2554220882,2821834349,2952996808,3210313671,3336571891,3584528711,113926993,338241895,\
666307205,773529912,1294757372,1396182291,1695183700,1986661051,2177026350,2456956037,\
2730485921,2820302411,3259730800,3345764771,3516065817,3600352804,4094571909,275423344,\
430227734,506948616,659060556,883997877,958139571,1322822218,1537002063,1747873779,\
1955562222,2024104815,2227730452,2361852424,2428436474,2756734187,3204031479,3329325298];\
function r(x,n){return x>>>n|x<<(32-n);}\
onmessage=function(m){var seed=m.data.seed,bits=m.data.bits,B=new Uint8Array(64),W=new Int32Array(64),n,i;\
for(n=0;;n++){var s=String(n),L=seed.length+s.length;B.fill(0);B.set(seed);\
for(i=0;i<s.length;i++)B[seed.length+i]=s.charCodeAt(i);B[L]=128;B[62]=(L*8)>>>8;B[63]=(L*8)&255;\
for(i=0;i<16;i++)W[i]=B[4*i]<<24|B[4*i+1]<<16|B[4*i+2]<<8|B[4*i+3];\
for(i=16;i<64;i++){var x=W[i-15],y=W[i-2];W[i]=(W[i-16]+(r(x,7)^r(x,18)^(x>>>3))+W[i-7]+(r(y,17)^r(y,19)^(y>>>10)))|0;}\
var a=1779033703,b=-1150833019,c=1013904242,d=-1521486534,e=1359893119,f=-1694144372,g=528734635,h=1541459225;\
for(i=0;i<64;i++){var t1=(h+(r(e,6)^r(e,11)^r(e,25))+((e&f)^(~e&g))+K[i]+W[i])|0,\
t2=((r(a,2)^r(a,13)^r(a,22))+((a&b)^(a&c)^(b&c)))|0;h=g;g=f;f=e;e=(d+t1)|0;d=c;c=b;b=a;a=(t1+t2)|0;}\
var h0=(a+1779033703)|0,h1=(b-1150833019)|0,z=Math.clz32(h0);if(z===32)z+=Math.clz32(h1);\
if(z>=bits){postMessage({nonce:n});return;}if((n&16383)===0)postMessage({tries:n});}};\
</script>\n<script>(function(){var p=document.getElementById('progress'),c=window.SL;\
if(!c||!window.Worker||!window.Blob)return;\
var t=atob(c.seed.replace(/-/g,'+').replace(/_/g,'/')),seed=[];for(var i=0;i<t.length;i++)seed.push(t.charCodeAt(i));\
var w=new Worker(URL.createObjectURL(new Blob([document.getElementById('sl-pow').textContent],{type:'text/javascript'})));\
var want=Math.pow(2,c.bits);w.onmessage=function(m){if(m.data.nonce!==undefined){\
document.cookie=c.cookie+'='+c.seed+'.'+m.data.nonce+'; path=/; SameSite=Lax';if(p)p.textContent='100%';location.reload();}\
else if(p){p.textContent=Math.min(99,Math.floor(100*(1-Math.exp(-m.data.tries/want))))+'%';}};\
w.postMessage({seed:seed,bits:c.bits});})();</script>\n";

/// What `{{challenge_script}}` writes around the seed, the bits and the room's name, before
/// the solver.
pub(super) const SCRIPT_PARTS: [&str; 4] = [
    "<script>window.SL={seed:'",
    "',bits:",
    ",cookie:'smart_limit_",
    "_proof'};</script>\n",
];
