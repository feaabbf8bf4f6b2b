from ttgnn.cli import main


def test_info_prints_arxiv_compression(capsys):
    assert main(["info", "--rows", "169343", "--dim", "128", "--rank", "8", "64"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 3
    assert "[55, 55, 56]" in out[1] and "19,392" in out[1] and "1,117.8x" in out[1]
    assert "943,616" in out[2] and "23.0x" in out[2]


def test_info_billion_rows(capsys):
    assert main(["info", "--rows", "1000000000", "--rank", "16", "--num-cores", "4"]) == 0
    line = capsys.readouterr().out.splitlines()[1]
    assert "381,632" in line and "1.5 MiB" in line


def test_info_bad_shape_is_a_clear_error(capsys):
    assert main(["info", "--rows", "1000", "--dim", "128", "--row-shape", "10,10"]) == 2
    assert "covers 100 rows, fewer than num_embeddings=1000" in capsys.readouterr().err
