select value c.id from c where c.n >= 1.5e0 -- comment
 order by c.id desc