package formdata

import (
	"bytes"
	"io"
	"mime/multipart"
	"testing"
)

// FuzzParts checks that Parts never panics nor changes the body, and that
// every form it accepts Go's mime/multipart reads the same: as many parts,
// each with the same name and (unless encoded) the same value.
func FuzzParts(f *testing.F) {
	f.Add([]byte("--b\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nm\r\n--b--\r\n"), "b")
	f.Add([]byte("--b \r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\nContent-Type: audio/wav\r\n\r\nRIFF\r\n--bb\r\n--b\r\nContent-Disposition: form-data; name=model\r\n\r\nwhisper-1\r\n--b--"), "b")
	f.Add([]byte("--b\r\nContent-Disposition: form-data; name*=UTF-8''mod%65l\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\nm=3D\r\n--b--"), "b")
	f.Add([]byte("--a-\r\nContent-Disposition: form-data; name=\"x\"\r\n\r\n\r\n--a---\r\n"), "a-")
	f.Fuzz(func(t *testing.T, body []byte, boundary string) {
		orig := bytes.Clone(body)
		parts, err := Parts(nil, body, []byte(boundary))
		if !bytes.Equal(body, orig) {
			t.Fatal("Parts modified the body")
		}
		if err != nil {
			return
		}
		mr := multipart.NewReader(bytes.NewReader(body), boundary)
		for i := 0; ; i++ {
			p, err := mr.NextPart()
			if err == io.EOF {
				if i != len(parts) {
					t.Fatalf("mime/multipart read %d parts; Parts %d", i, len(parts))
				}
				return
			}
			if err != nil {
				t.Fatalf("part %d: Parts accepted what mime/multipart refuses: %v", i, err)
			}
			if i >= len(parts) {
				t.Fatalf("mime/multipart reads more than Parts' %d parts", len(parts))
			}
			if p.FormName() != parts[i].Name {
				t.Fatalf("part %d: name %q; mime/multipart reads %q", i, parts[i].Name, p.FormName())
			}
			v, err := io.ReadAll(p)
			if err != nil && parts[i].Encoded {
				return // a quoted-printable decoding error: the value is not read anyway
			}
			if err != nil {
				t.Fatalf("part %d: mime/multipart: %v", i, err)
			}
			if pt := parts[i]; !bytes.Equal(body[pt.Offset:pt.Offset+len(pt.Value)], pt.Value) {
				t.Fatalf("part %d: Offset %d does not locate its value", i, pt.Offset)
			}
			if !parts[i].Encoded && !bytes.Equal(v, parts[i].Value) {
				t.Fatalf("part %d: value %q; mime/multipart reads %q", i, parts[i].Value, v)
			}
		}
	})
}
