package upstream

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// Exchange is one request in flight and its response. Header is valid until
// Release. Body reads the response body (chunked framing removed).
type Exchange struct {
	client     *Client
	conn       *conn
	resp       fasthttp.Response
	body       io.Reader
	chunked    chunkedBody  // the body when the response is chunked
	answer     bytes.Reader // the body of an answer (NewAnswer)
	stop       func() bool  // stops the context watch
	start      time.Time
	deadline   time.Time
	firstByte  time.Time
	reusedConn bool
	bodyEOF    bool
	gotHeader  bool

	// An Authorizer's work space (auth.go), kept across uses.
	authReq   AuthRequest
	authPath  []byte
	authLines []byte
}

// Header returns the response headers. Valid until Release.
func (ex *Exchange) Header() *fasthttp.ResponseHeader { return &ex.resp.Header }

// StatusCode is the response status.
func (ex *Exchange) StatusCode() int { return ex.resp.Header.StatusCode() }

// FirstByte is when the response headers arrived.
func (ex *Exchange) FirstByte() time.Time { return ex.firstByte }

// Upstream is the name of the upstream that served the exchange.
func (ex *Exchange) Upstream() string { return ex.client.name }

func (ex *Exchange) attempt(ctx context.Context, req *Request) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	// Credentials first: a failure sends nothing and holds no connection.
	if err := ex.appendAuth(req); err != nil {
		return err
	}
	cn, reused, err := ex.client.getConn(ctx, ex.deadline)
	if err != nil {
		return err
	}
	ex.conn, ex.reusedConn = cn, reused
	// Canceling ctx closes the socket: a blocked read or write returns at
	// once and the upstream sees the close.
	ex.stop = context.AfterFunc(ctx, cn.cancel)
	cn.cap = ex.deadline
	if err := ex.writeRequest(req); err != nil {
		return err
	}
	cn.step = ex.client.timeouts.FirstByte
	ex.resp.StreamBody = true
	if err := ex.resp.Header.Read(cn.br); err != nil {
		return err
	}
	for ex.resp.Header.StatusCode() >= 100 && ex.resp.Header.StatusCode() < 200 {
		if err := ex.resp.Header.Read(cn.br); err != nil {
			return err
		}
	}
	ex.gotHeader = true
	ex.firstByte = time.Now()
	cn.step = ex.client.timeouts.Idle
	status := ex.resp.Header.StatusCode()
	if status == fasthttp.StatusNoContent || status == fasthttp.StatusNotModified {
		// No body, whatever the headers say (RFC 9110 §15.3.5, §15.4.5):
		// an MCP server's 204 to a DELETE has no Content-Length, and
		// would otherwise read as a body lasting until the close.
		ex.body = bytes.NewReader(nil)
		return nil
	}
	if ex.resp.Header.ContentLength() == -1 {
		// Chunked: decoded here, so that Ready can see past the chunk at hand.
		ex.chunked.reset(cn.br)
		ex.body = &ex.chunked
		return nil
	}
	if err := ex.resp.ReadBody(cn.br, 0); err != nil {
		return err
	}
	ex.body = ex.resp.BodyStream()
	if ex.body == nil {
		ex.body = bytes.NewReader(nil)
	}
	return nil
}

// Ready reports whether a Read of the body would return without waiting for
// the network: its bytes (or its end) already arrived with earlier ones. A
// stream uses it to forward in one write what arrived in one piece. Only a
// chunked body, the framing of streams, can say; others report false.
func (ex *Exchange) Ready() bool {
	return ex.body == &ex.chunked && ex.chunked.Ready()
}

func (ex *Exchange) writeRequest(req *Request) error {
	c := ex.client
	w := writers.Get().(*bufio.Writer)
	w.Reset(ex.conn.nc)
	defer func() { w.Reset(nil); writers.Put(w) }()
	w.WriteString(req.Method)
	w.WriteByte(' ')
	w.WriteString(c.basePath)
	w.WriteString(req.Path)
	w.WriteString(" HTTP/1.1\r\n")
	w.Write(c.static)
	w.Write(req.Header)
	w.Write(ex.authLines)
	if req.Body != nil || req.Method == "POST" {
		w.WriteString("Content-Length: ")
		var nb [20]byte
		w.Write(strconv.AppendInt(nb[:0], int64(len(req.Body)), 10))
		w.WriteString("\r\n")
	}
	w.WriteString("\r\n")
	w.Write(req.Body)
	if d := ex.client.timeouts.FirstByte; d > 0 {
		ex.conn.arm(&ex.conn.wdl, d, ex.conn.nc.SetWriteDeadline)
	}
	return w.Flush()
}

// noResponseByte reports whether err ended the exchange before any byte of
// a response arrived on a connection reset or closed by the server.
func (ex *Exchange) noResponseByte(err error) bool {
	return !ex.gotHeader && isConnReset(err) && !errors.Is(err, ErrTimeout)
}

// Read reads the response body. It returns io.EOF at the end of the body and
// a classified error (ErrTimeout, ErrCanceled, ErrUnreachable) otherwise.
func (ex *Exchange) Read(p []byte) (int, error) {
	n, err := ex.body.Read(p)
	if err == io.EOF {
		ex.bodyEOF = true
		return n, io.EOF
	}
	if err != nil {
		if ex.conn.canceled.Load() {
			return n, fmt.Errorf("%w: %s", ErrCanceled, ex.client.name)
		}
		return n, ex.client.classify(context.Background(), fmt.Errorf("reading response body: %w", err))
	}
	return n, nil
}

// ReadAll reads the whole body into dst, failing past limit bytes.
func (ex *Exchange) ReadAll(dst []byte, limit int) ([]byte, error) {
	if cap(dst)-len(dst) < 4096 {
		dst = append(dst, make([]byte, 4096)...)[:len(dst)]
	}
	for {
		if len(dst) == cap(dst) {
			dst = append(dst, 0)[:len(dst)]
		}
		n, err := ex.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst, err
		}
		if limit > 0 && len(dst) > limit {
			return dst, fmt.Errorf("%w: %s: response body larger than %d bytes", ErrUnreachable, ex.client.name, limit)
		}
	}
}

// Release returns the connection to the pool when the body was read to its
// end and the connection may be reused, and closes it otherwise. The
// Exchange must not be used afterwards.
func (ex *Exchange) Release() {
	// A context canceled as the exchange ends may have started the
	// watch's cancel (which closes the connection) and not yet marked the
	// connection: stop then reports false, and the connection is not
	// pooled, or the next request would be sent on a closed one.
	stopped := true
	if ex.stop != nil {
		stopped = ex.stop()
	}
	if ex.conn != nil {
		reusable := stopped && !ex.conn.canceled.Load() && ex.bodyEOF &&
			!ex.resp.Header.ConnectionClose() && ex.resp.Header.ContentLength() != -2
		ex.resp.CloseBodyStream()
		if reusable {
			ex.client.putConn(ex.conn)
		} else {
			ex.client.closeConn(ex.conn)
		}
		ex.conn = nil
	}
	ex.resp.Reset()
	ex.chunked.reset(nil)
	ex.answer.Reset(nil)
	ex.client, ex.body, ex.stop = nil, nil, nil
	ex.start, ex.deadline, ex.firstByte = time.Time{}, time.Time{}, time.Time{}
	ex.reusedConn, ex.bodyEOF, ex.gotHeader = false, false, false
	exchangePool.Put(ex)
}

// dropConn closes the connection of a failed attempt.
func (ex *Exchange) dropConn() {
	if ex.stop != nil {
		ex.stop()
		ex.stop = nil
	}
	if ex.conn != nil {
		ex.resp.CloseBodyStream()
		ex.client.closeConn(ex.conn)
		ex.conn = nil
	}
	ex.resp.Reset()
	ex.chunked.reset(nil)
	ex.gotHeader, ex.body = false, nil
}

// NewAnswer returns an Exchange whose response is served from memory: the
// reply a plugin or the response cache gave instead of an upstream's, with
// status, Content-Type contentType and body (which it reads, not copies).
// name is what Upstream reports. Release it as any other.
func NewAnswer(name string, status int, contentType string, body []byte) *Exchange {
	ex := acquireExchange()
	ex.client = answerClient(name)
	ex.resp.Header.SetStatusCode(status)
	ex.resp.Header.SetContentType(contentType)
	ex.resp.Header.SetContentLength(len(body))
	ex.answer.Reset(body)
	ex.body = &ex.answer
	ex.start = time.Now()
	ex.firstByte = ex.start
	ex.gotHeader = true
	return ex
}

// answerClients are the Clients answers are named by, one per name.
var answerClients sync.Map // string → *Client

func answerClient(name string) *Client {
	if c, ok := answerClients.Load(name); ok {
		return c.(*Client)
	}
	c, _ := answerClients.LoadOrStore(name, &Client{name: name})
	return c.(*Client)
}
